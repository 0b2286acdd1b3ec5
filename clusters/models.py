"""Schedulers' view: clusters, their nodes, the binding of a node to a server.

A node is how Kubernetes or Slurm sees a computing entity; a server is hardware. Nodes bind
to servers by identity (see `clusters.reconcile`); GPUs are resources of a node, never nodes.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from inventory.models import Server

from .choices import BindingMethod, ClusterKind, ClusterSource, SnapshotStatus
from .kubeconfig import validate_kubeconfig_path


class Cluster(models.Model):
    """A Kubernetes or Slurm cluster and how its node records arrive."""

    name = models.SlugField(max_length=100, unique=True)
    kind = models.CharField(max_length=16, choices=ClusterKind.choices)
    source = models.CharField(
        max_length=16, choices=ClusterSource.choices, default=ClusterSource.PUSH
    )
    # Pull settings. Secrets: write-only in the API, never shown in pages or logs.
    kubeconfig_path = models.CharField(
        max_length=500,
        blank=True,
        default="",
        validators=[validate_kubeconfig_path],
        help_text="a file inside ATLAS_KUBECONFIG_DIR (a relative path is taken there)",
    )
    kube_context = models.CharField(max_length=200, blank=True, default="")
    slurmrestd_url = models.URLField(max_length=500, blank=True, default="")
    slurmrestd_user = models.CharField(max_length=100, blank=True, default="")
    slurmrestd_token = models.TextField(
        blank=True, default="", help_text="JWT from `scontrol token`"
    )
    slurmrestd_api_version = models.CharField(max_length=16, blank=True, default="")
    sync_interval_s = models.PositiveIntegerField(default=300)

    last_sync_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_snapshot_format = models.CharField(max_length=64, blank=True, default="")
    source_version = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def pulls(self) -> bool:
        return self.source != ClusterSource.PUSH


class Node(models.Model):
    """A scheduler node record, as of the cluster's last snapshot; bound to at most one server."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    kind = models.CharField(max_length=16, choices=ClusterKind.choices)
    hostname = models.CharField(max_length=253, blank=True, default="")
    addresses = models.JSONField(default=list, blank=True)
    system_uuid = models.CharField(max_length=64, blank=True, default="", db_index=True)
    machine_id = models.CharField(max_length=64, blank=True, default="")

    state = models.CharField(max_length=32, blank=True, default="unknown")
    raw_state = models.CharField(max_length=200, blank=True, default="")
    state_flags = models.JSONField(default=list, blank=True)
    ready = models.BooleanField(default=False)
    schedulable = models.BooleanField(default=False)
    reason = models.TextField(blank=True, default="")
    taints = models.JSONField(default=list, blank=True)
    partitions = models.JSONField(default=list, blank=True)
    cpus = models.PositiveIntegerField(null=True, blank=True)
    cpus_effective = models.PositiveIntegerField(
        null=True, blank=True, help_text="Slurm's CPUEfctv: the CPUs left to jobs after CoreSpec"
    )
    memory_bytes = models.BigIntegerField(null=True, blank=True)

    gpu_capacity = models.PositiveIntegerField(default=0)
    gpu_allocatable = models.PositiveIntegerField(default=0)
    gpu_used = models.PositiveIntegerField(null=True, blank=True)
    gres = models.JSONField(default=list, blank=True)
    resources = models.JSONField(default=dict, blank=True)
    mig_resources = models.JSONField(default=dict, blank=True)
    mig_used = models.JSONField(default=dict, blank=True)
    gpu_product = models.CharField(max_length=128, blank=True, default="")
    gpu_replicas = models.PositiveIntegerField(null=True, blank=True)
    sharing_strategy = models.CharField(max_length=32, blank=True, default="")
    mig_strategy = models.CharField(max_length=32, blank=True, default="")
    mig_config = models.CharField(max_length=100, blank=True, default="")
    labels = models.JSONField(default=dict, blank=True)
    versions = models.JSONField(
        default=dict, blank=True, help_text="kubelet, container runtime, OS, kernel, Slurm, driver"
    )

    server = models.ForeignKey(
        Server, null=True, blank=True, on_delete=models.SET_NULL, related_name="nodes"
    )
    binding_method = models.CharField(
        max_length=16, choices=BindingMethod.choices, blank=True, default=BindingMethod.NONE
    )
    bound_at = models.DateTimeField(null=True, blank=True)

    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    gone_at = models.DateTimeField(null=True, blank=True, help_text="absent from the last snapshot")

    class Meta:
        ordering = ["cluster_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="node_cluster_name")
        ]
        indexes = [
            models.Index(fields=["cluster", "gone_at"]),
            # The state filter's dropdown walks these (core/db/distinct.py), and the server
            # list's cluster dropdown probes the last once per cluster.
            models.Index(
                fields=["state"], condition=Q(gone_at__isnull=True), name="node_live_state"
            ),
            models.Index(  # only the nodes with flags: most have none
                fields=["state_flags"],
                condition=Q(gone_at__isnull=True) & ~Q(state_flags=[]),
                name="node_live_state_flags",
            ),
            models.Index(
                fields=["cluster"], condition=Q(server__isnull=False), name="node_bound_cluster"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name}"

    @property
    def binding_manual(self) -> bool:
        return self.binding_method == BindingMethod.MANUAL

    @property
    def gpu_free(self) -> int | None:
        """Allocatable minus used, where the scheduler tells what is used."""
        if self.gpu_used is None:
            return None
        return max(self.gpu_allocatable - self.gpu_used, 0)


class ClusterSnapshot(models.Model):
    """A scheduler snapshot as received (pushed or pulled), and what became of it.

    Small pushed snapshots are applied in the request; larger ones are stored raw and applied
    by a worker. `raw` is kept only while the snapshot waits (pending) or is held; a held
    snapshot would have marked half or more of the cluster's live nodes gone, or more than
    ATLAS_SNAPSHOT_MAX_GONE_NODES.
    """

    cluster_name = models.CharField(max_length=100)
    source = models.CharField(max_length=8, default="push")  # push or pull
    raw = models.BinaryField(default=bytes, editable=False)
    size_bytes = models.PositiveBigIntegerField(default=0)
    confirm_shrink = models.BooleanField(default=False)
    status = models.CharField(
        max_length=16, choices=SnapshotStatus.choices, default=SnapshotStatus.PENDING
    )
    received_at = models.DateTimeField(default=timezone.now)
    applied_at = models.DateTimeField(null=True, blank=True)
    format = models.CharField(max_length=64, blank=True, default="")
    kind = models.CharField(max_length=16, blank=True, default="")
    nodes = models.PositiveIntegerField(null=True, blank=True)
    added = models.PositiveIntegerField(null=True, blank=True)
    gone = models.PositiveIntegerField(null=True, blank=True)
    pods = models.PositiveIntegerField(null=True, blank=True)
    node_set_hash = models.CharField(
        max_length=64, blank=True, default="", help_text="of a held snapshot's node names"
    )
    message = models.TextField(blank=True, default="")
    errors = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["cluster_name", "status"]),
            models.Index(fields=["status", "received_at"]),
        ]

    def __str__(self) -> str:
        return f"snapshot {self.pk} of {self.cluster_name} ({self.status})"


class ReconcileState(models.Model):
    """What the last reconciliation saw, so a beat tick only reconciles after a change.

    `requested_at` is set while a reconcile waits in the queue, so a burst of snapshots
    enqueues one reconcile, not one each.
    """

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    inventory_revision = models.BigIntegerField(default=0)
    nodes_revision = models.BigIntegerField(default=0)
    reconciled_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    requested_at = models.DateTimeField(null=True, blank=True)
    judged_globals = models.TextField(
        blank=True, default="", help_text="the clusters and hardware profiles the last pass read"
    )

    def __str__(self) -> str:
        return f"reconciled at {self.reconciled_at}"


class JudgedServer(models.Model):
    """What the last full reconciliation judged of one server, as digests of its rule inputs
    (`clusters.judged`): the next full pass re-judges only the servers whose inputs differ.

    Keyed by the server's id without a constraint, so a deleted server's row stays to say so.
    """

    server = models.OneToOneField(
        Server,
        primary_key=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="judged",
    )
    identity = models.TextField(help_text="digest of what binding reads")
    facts = models.TextField(help_text="digest of what the rules read (GPUs, MIG, claims, age)")
    versions = models.TextField(
        blank=True, default="", help_text="its driver and CUDA versions, and whether it has GPUs"
    )

    def __str__(self) -> str:
        return f"judged server {self.server_id}"


class JudgedNode(models.Model):
    """What the last full reconciliation judged of one node: a digest of its rule inputs and
    the binding it left, so the next pass re-judges the node's old server when it moves or
    goes. Keyed by the node's id without a constraint, so a deleted node's row stays to say so.
    """

    node = models.OneToOneField(
        Node,
        primary_key=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="judged",
    )
    facts = models.TextField(help_text="digest of the node's rule inputs, binding aside")
    bound_to = models.BigIntegerField(default=0, help_text="the server id it was bound to; 0: none")
    binding_method = models.CharField(max_length=16, blank=True, default="")

    def __str__(self) -> str:
        return f"judged node {self.node_id}"
