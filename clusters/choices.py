"""Enumerations of the scheduler layer."""

from django.db import models


class ClusterKind(models.TextChoices):
    KUBERNETES = "kubernetes", "Kubernetes"
    SLURM = "slurm", "Slurm"


class ClusterSource(models.TextChoices):
    PUSH = "push", "Pushed snapshots"
    KUBECONFIG = "kubeconfig", "Kubernetes API (kubeconfig)"
    IN_CLUSTER = "in_cluster", "Kubernetes API (in-cluster service account)"
    SLURMRESTD = "slurmrestd", "slurmrestd"


class SnapshotStatus(models.TextChoices):
    PENDING = "pending", "Pending"  # stored, a worker applies it
    APPLIED = "applied", "Applied"
    HELD = "held", "Held"  # would mark half or more of the live nodes (or too many) gone
    FAILED = "failed", "Failed"
    SUPERSEDED = "superseded", "Superseded"  # a newer snapshot was applied first


class BindingMethod(models.TextChoices):
    NONE = "", "Unbound"
    SYSTEM_UUID = "system_uuid", "SMBIOS system UUID"
    MACHINE_ID = "machine_id", "machine-id"
    FQDN = "fqdn", "FQDN"
    HOSTNAME = "hostname", "short hostname"
    ADDRESS = "address", "IP address"
    MANUAL = "manual", "set by a person"


class Severity(models.TextChoices):
    CRITICAL = "critical", "Critical"
    WARNING = "warning", "Warning"
    INFO = "info", "Information"


class FindingType(models.TextChoices):
    NODE_WITHOUT_SERVER = "node_without_server", "Node without a server"
    SERVER_WITHOUT_NODE = "server_without_node", "Server in no scheduler"
    GPU_COUNT_MISMATCH = "gpu_count_mismatch", "GPU count mismatch"
    MIG_MISMATCH = "mig_mismatch", "MIG mismatch"
    MIG_PENDING_REBOOT = "mig_pending_reboot", "MIG mode pending a reboot"
    GPU_MODEL_MISMATCH = "gpu_model_mismatch", "GPU model mismatch"
    STALE_AGENT = "stale_agent", "Stale agent on a ready node"
    DUPLICATE_IDENTITY = "duplicate_identity", "Duplicate identity"
    DRIVER_SKEW = "driver_skew", "Driver or CUDA version skew"
    UNHEALTHY_GPU = "unhealthy_gpu", "Unhealthy GPU on a schedulable node"
    NODE_UNAVAILABLE = "node_unavailable", "Node unavailable, hardware healthy"
    GPU_NOT_IN_NVML = "gpu_not_in_nvml", "GPU on the PCI bus, not in NVML"
    BELOW_PROFILE = "below_profile", "Fewer GPUs than the hardware profile"
    DUPLICATE_GPU = "duplicate_gpu", "GPU reported by two servers"
