"""The findings vocabulary: one severity, one family per writer, every finding type.

Every finding type of every family is one member of `FindingType`, with its family beside its
code and its words: the API's `?type=` filter, the model's choices (so `full_clean()`), the
admin, the findings page and the runbook all read this one list. A new finding type is one
line here (and its section in docs/findings.md, which tests/pages/test_runbook.py asks for).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from core import palette


class Severity(models.TextChoices):
    """How bad a finding (or a GPU health event) is. The values are palette tones, so every
    badge and figure colours a severity without a mapping of its own."""

    CRITICAL = palette.CRITICAL, "Critical"
    WARNING = palette.WARNING, "Warning"
    INFO = palette.INFO, "Information"


SEVERITY_ORDER: tuple[str, ...] = (Severity.CRITICAL, Severity.WARNING, Severity.INFO)
"""Severities, worst first (their names do not sort by weight)."""


class Family(models.TextChoices):
    """Who writes a finding: each writer answers for its family's findings and no other's."""

    RECONCILIATION = "reconciliation", "Reconciliation (schedulers and inventory)"
    HEALTH = "health", "GPU health"
    FABRIC = "fabric", "Network fabric"
    WORKLOADS = "workloads", "Workloads (jobs and pods on the GPUs)"


class FindingType(models.TextChoices):
    """Every finding type: `CODE = "code", Family.X, "words"`."""

    family: Family

    def __new__(cls, value: str, family: Family):
        member = str.__new__(cls, value)
        member._value_ = value
        member.family = Family(family)
        return member

    # Reconciliation: where the schedulers and the inventory disagree (clusters/rules/).
    NODE_WITHOUT_SERVER = "node_without_server", Family.RECONCILIATION, "Node without a server"
    SERVER_WITHOUT_NODE = "server_without_node", Family.RECONCILIATION, "Server in no scheduler"
    GPU_COUNT_MISMATCH = "gpu_count_mismatch", Family.RECONCILIATION, "GPU count mismatch"
    MIG_MISMATCH = "mig_mismatch", Family.RECONCILIATION, "MIG mismatch"
    MIG_PENDING_REBOOT = "mig_pending_reboot", Family.RECONCILIATION, "MIG mode pending a reboot"
    GPU_MODEL_MISMATCH = "gpu_model_mismatch", Family.RECONCILIATION, "GPU model mismatch"
    STALE_AGENT = "stale_agent", Family.RECONCILIATION, "Stale agent on a ready node"
    DUPLICATE_IDENTITY = "duplicate_identity", Family.RECONCILIATION, "Duplicate identity"
    DRIVER_SKEW = "driver_skew", Family.RECONCILIATION, "Driver or CUDA version skew"
    UNHEALTHY_GPU = (
        "unhealthy_gpu",
        Family.RECONCILIATION,
        "Unhealthy GPU on a schedulable node",
    )
    NODE_UNAVAILABLE = (
        "node_unavailable",
        Family.RECONCILIATION,
        "Node unavailable, hardware healthy",
    )
    GPU_NOT_IN_NVML = "gpu_not_in_nvml", Family.RECONCILIATION, "GPU on the PCI bus, not in NVML"
    BELOW_PROFILE = "below_profile", Family.RECONCILIATION, "Fewer GPUs than the hardware profile"
    DUPLICATE_GPU = "duplicate_gpu", Family.RECONCILIATION, "GPU reported by two servers"
    IP_ADDRESS_DUPLICATE = (
        "ip_address_duplicate",
        Family.RECONCILIATION,
        "IP address on several servers",
    )
    RACK_UNITS_OVERLAP = "rack_units_overlap", Family.RECONCILIATION, "Servers overlap in a rack"
    NODE_DECLARED_TWICE = (
        "node_declared_twice",
        Family.RECONCILIATION,
        "Scheduler node declared by two servers",
    )
    DECLARED_NODE_CONFLICT = (
        "declared_node_conflict",
        Family.RECONCILIATION,
        "Declared node bound by hand to another server",
    )

    # GPU health: events and counters of one GPU, slot or server (health/rules.py).
    GPU_FATAL_XID = "gpu_fatal_xid", Family.HEALTH, "Fatal Xid on a GPU"
    GPU_REPEATED_FAILURE = "gpu_repeated_failure", Family.HEALTH, "GPU failing again"
    SLOT_REPEATED_FAILURE = (
        "slot_repeated_failure",
        Family.HEALTH,
        "Slot failing across replacements",
    )
    SERVER_REPEATED_FAILURE = (
        "server_repeated_failure",
        Family.HEALTH,
        "Server whose GPUs keep failing",
    )
    GPU_ROW_REMAP_FAILURE = "gpu_row_remap_failure", Family.HEALTH, "Row remapping failed"
    GPU_MEMORY_REPAIR_PENDING = (
        "gpu_memory_repair_pending",
        Family.HEALTH,
        "Row remap or page retirement pending",
    )
    GPU_UNCORRECTED_ECC = "gpu_uncorrected_ecc", Family.HEALTH, "Uncorrected ECC errors"
    GPU_PCIE_DEGRADED = (
        "gpu_pcie_degraded",
        Family.HEALTH,
        "PCIe link narrower or slower than its best",
    )
    GPU_RECOVERY_ACTION = (
        "gpu_recovery_action",
        Family.HEALTH,
        "The driver asks for a reset or reboot",
    )

    # Network fabric: switches, cables, rails (fabric/rules.py).
    FABRIC_LINK_DEGRADED = (
        "fabric_link_degraded",
        Family.FABRIC,
        "Link slower or narrower than its peers",
    )
    FABRIC_PORT_GONE = "fabric_port_gone", Family.FABRIC, "A port that was up is gone"
    FABRIC_WRONG_RAIL = "fabric_wrong_rail", Family.FABRIC, "Server NIC on another rail's leaf"
    FABRIC_TOPOLOGY_MISMATCH = (
        "fabric_topology_mismatch",
        Family.FABRIC,
        "Scheduler topology disagrees with the fabric",
    )
    FABRIC_SERVER_ABSENT = (
        "fabric_server_absent",
        Family.FABRIC,
        "GPU server absent from its peers' fabric",
    )
    FABRIC_SERVER_UNBALANCED = (
        "fabric_server_unbalanced",
        Family.FABRIC,
        "Less network bandwidth per GPU than its peers",
    )

    # Workloads: what the GPUs run against what the schedulers gave (workloads/rules.py).
    PROCESS_OUTSIDE_ALLOCATION = (
        "process_outside_allocation",
        Family.WORKLOADS,
        "Process on a GPU its workload was not given",
    )
    STRAY_GPU_PROCESS = "stray_gpu_process", Family.WORKLOADS, "GPU memory held by no workload"
    WORKLOAD_ON_GPU_NEEDING_ACTION = (
        "workload_on_gpu_needing_action",
        Family.WORKLOADS,
        "Workload on a GPU that needs action",
    )
    WORKLOAD_ON_MISRECONCILED_SERVER = (
        "workload_on_misreconciled_server",
        Family.WORKLOADS,
        "Workload on a server reconciliation marks wrong",
    )

    @classmethod
    def of_family(cls, family: str) -> list[str]:
        """The codes of one family's types, in their order here."""
        return [t.value for t in cls if t.family == family]


def family_q(family: str) -> Q:
    """The findings of one family, as a condition on their type."""
    return Q(type__in=FindingType.of_family(family))
