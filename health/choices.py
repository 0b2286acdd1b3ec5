"""Enumerations of the health layer."""

from django.db import models


class EventKind(models.TextChoices):
    """The report's event kinds (agent/report.schema.json `event.kind`)."""

    XID = "xid", "Xid"
    SXID = "sxid", "NVSwitch SXid"
    FALLEN_OFF_BUS = "fallen_off_bus", "Fallen off the bus"
    PROBE_FAILURE = "probe_failure", "Probe failure"


class Severity(models.TextChoices):
    """The same words as the scheduler layer's findings, so both sort and colour alike."""

    CRITICAL = "critical", "Critical"
    WARNING = "warning", "Warning"
    INFO = "info", "Information"


class HealthFindingType(models.TextChoices):
    """What the rules in `health.rules` raise."""

    FATAL_XID = "gpu_fatal_xid", "Fatal Xid on a GPU"
    REPEATED_FAILURE = "gpu_repeated_failure", "GPU failing again"
    SLOT_REPEATED_FAILURE = "slot_repeated_failure", "Slot failing across replacements"
    SERVER_REPEATED_FAILURE = "server_repeated_failure", "Server whose GPUs keep failing"
    ROW_REMAP_FAILURE = "gpu_row_remap_failure", "Row remapping failed"
    MEMORY_REPAIR_PENDING = "gpu_memory_repair_pending", "Row remap or page retirement pending"
    UNCORRECTED_ECC = "gpu_uncorrected_ecc", "Uncorrected ECC errors"
    PCIE_DEGRADED = "gpu_pcie_degraded", "PCIe link narrower or slower than its best"
    RECOVERY_ACTION = "gpu_recovery_action", "The driver asks for a reset or reboot"
