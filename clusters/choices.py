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
    DECLARED = "declared", "declared by the agent"
    SYSTEM_UUID = "system_uuid", "SMBIOS system UUID"
    MACHINE_ID = "machine_id", "machine-id"
    FQDN = "fqdn", "FQDN"
    HOSTNAME = "hostname", "short hostname"
    ADDRESS = "address", "IP address"
    MANUAL = "manual", "set by a person"
