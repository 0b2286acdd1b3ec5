"""Enumerations of the inventory layer."""

from collections.abc import Iterable

from django.db import models


class ServerState(models.TextChoices):
    """Derived from last_seen against the thresholds in settings; never stored."""

    ONLINE = "online", "Online"
    STALE = "stale", "Stale"
    OFFLINE = "offline", "Offline"
    NEVER = "never", "Never reported"


class GpuStatus(models.TextChoices):
    OK = "ok", "OK"
    ERROR = "error", "Error"
    LOST = "lost", "Lost"  # the last report no longer shows it


class NicKind(models.TextChoices):
    ETHERNET = "ethernet", "Ethernet"
    INFINIBAND = "infiniband", "InfiniBand"


class ReportStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPLIED = "applied", "Applied"
    SUPERSEDED = "superseded", "Superseded"  # a newer report of the server was applied first
    FAILED = "failed", "Failed"


class ChangeKind(models.TextChoices):
    SERVER_ADDED = "server_added", "Server added"
    GPU_ADDED = "gpu_added", "GPU added"
    GPU_REMOVED = "gpu_removed", "GPU removed"
    GPU_REPLACED = "gpu_replaced", "GPU replaced"
    GPU_MOVED_IN = "gpu_moved_in", "GPU moved in"
    GPU_MOVED_OUT = "gpu_moved_out", "GPU moved out"
    GPU_RETURNED = "gpu_returned", "GPU back"
    GPU_NOT_IN_NVML = "gpu_not_in_nvml", "GPU on the PCI bus, not in NVML"
    MIG_RELAYOUT = "mig_relayout", "MIG re-layout"
    MIG_MODE = "mig_mode", "MIG mode changed"
    DRIVER_UPGRADE = "driver_upgrade", "Driver changed"
    MEMORY_CHANGE = "memory_change", "Memory changed"
    IDENTITY_CHANGE = "identity_change", "Identity changed"


# Link classes from fastest to slowest; NV<n> is NVLink with n links.
PCIE_LINK_CLASSES = ("PIX", "PXB", "PHB", "NODE", "SYS")


def link_rank(link_class: str) -> int:
    """Order link classes fastest first: NV<n> (more links first), then PIX ... SYS."""
    if link_class.startswith("NV"):
        try:
            return -int(link_class[2:])
        except ValueError:
            return 0
    try:
        return 1 + PCIE_LINK_CLASSES.index(link_class)
    except ValueError:
        return len(PCIE_LINK_CLASSES) + 1


def worst_link_class(classes: Iterable[str]) -> str | None:
    """The slowest class among pairs: what a job spread over these GPUs is bound by (placement
    choosing a GPU set and a workload's locality judge by this one rule)."""
    ordered = sorted(set(classes), key=link_rank)
    return ordered[-1] if ordered else None
