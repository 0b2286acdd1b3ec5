"""Workloads and the GPUs they hold, with history by GPU serial, and what the GPUs say.

A Workload row is one Slurm job (array task, heterogeneous component) or one pod group of a
cluster; its Allocation rows are the GPUs it holds or held, one row per GPU (or MIG device)
per node, with `since` and `until`, so a GPU keeps its past workloads by serial as health
keeps its events. GpuProcess and PodDevice are facts about now: each report replaces its
server's rows (what a finding needs is copied into the finding).
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from workloads.choices import Verdict, WorkloadKind, WorkloadState
from workloads.describe import workload_label


class Workload(models.Model):
    cluster = models.ForeignKey(
        "clusters.Cluster", on_delete=models.CASCADE, related_name="workloads"
    )
    kind = models.CharField(max_length=16, choices=WorkloadKind.choices)
    scheduler_id = models.CharField(max_length=300)
    name = models.CharField(max_length=300, blank=True, default="")
    user = models.CharField(max_length=128, blank=True, default="", db_index=True)
    account = models.CharField(max_length=253, blank=True, default="", db_index=True)
    partition = models.CharField(max_length=200, blank=True, default="")
    state = models.CharField(
        max_length=16, choices=WorkloadState.choices, default=WorkloadState.UNKNOWN
    )
    raw_state = models.CharField(max_length=200, blank=True, default="")
    submitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    node_count = models.PositiveIntegerField(default=0)
    gpu_count = models.PositiveIntegerField(default=0)
    gpus_per_node = models.PositiveIntegerField(null=True, blank=True)
    requested = models.JSONField(default=dict, blank=True)
    gpu_models = models.JSONField(default=list, blank=True)
    owner_kind = models.CharField(max_length=64, blank=True, default="")
    sharing = models.CharField(max_length=32, blank=True, default="")
    # Filled by placement (a reader): within_node, switch_hops, verdict, why, better.
    locality = models.JSONField(default=dict, blank=True)
    verdict = models.CharField(
        max_length=16, choices=Verdict.choices, default=Verdict.UNKNOWN, db_index=True
    )
    source = models.CharField(max_length=64, blank=True, default="")
    # The record's digest as last applied: an unchanged job in a full listing costs nothing.
    digest = models.CharField(max_length=64, blank=True, default="")
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "kind", "scheduler_id"], name="workload_cluster_scheduler_id"
            )
        ]
        indexes = [
            models.Index(fields=["cluster", "state"]),
            models.Index(fields=["state", "ended_at"]),
            # The GPU model dropdown walks it (core/db/distinct.py): few distinct lists.
            models.Index(fields=["gpu_models"], name="workload_gpu_models"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.scheduler_id}"

    @property
    def label(self) -> str:
        """ "job 5679 of alice", as every page names it (`describe.workload_label`)."""
        return workload_label(self.kind, self.scheduler_id, self.user)


class Allocation(models.Model):
    """One GPU (or MIG device) a workload holds or held on one node.

    `index` is the scheduler's index on the node (Slurm's IDX) and `uuid` the device ID the
    kubelet named; both empty for a GPU known only by count. `gpu`, `mig_device`, `node`
    and `server` are the joins (null where nothing matches); `gpu_serial` keeps the join by
    serial after a GPU row moves or goes. `until` is null while it holds the GPU.
    """

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="allocations")
    node_name = models.CharField(max_length=253)
    node = models.ForeignKey(
        "clusters.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    server = models.ForeignKey(
        "inventory.Server", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    gpu = models.ForeignKey(
        "inventory.Gpu",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="allocations",
    )
    mig_device = models.ForeignKey(
        "inventory.MigDevice",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="allocations",
    )
    index = models.PositiveIntegerField(null=True, blank=True)
    uuid = models.CharField(max_length=128, blank=True, default="")
    gpu_type = models.CharField(max_length=128, blank=True, default="")
    gpu_serial = models.CharField(max_length=128, blank=True, default="", db_index=True)
    pod = models.CharField(max_length=253, blank=True, default="")
    shared = models.BooleanField(default=False)
    since = models.DateTimeField(default=timezone.now)
    until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["workload_id", "node_name", "index", "id"]
        indexes = [
            models.Index(fields=["gpu", "until"]),
            models.Index(fields=["server", "until"]),
            models.Index(fields=["node", "until"]),
            models.Index(fields=["workload", "until"]),
        ]

    def __str__(self) -> str:
        which = self.index if self.index is not None else (self.uuid or "?")
        return f"{self.workload_id} on {self.node_name} GPU {which}"


class GpuProcess(models.Model):
    """A compute process on a GPU (or MIG device) as the server's last report saw it, and
    the workload its cgroup names (Slurm job and step, or pod UID and container)."""

    server = models.ForeignKey(
        "inventory.Server", on_delete=models.CASCADE, related_name="gpu_processes"
    )
    gpu = models.ForeignKey(
        "inventory.Gpu", null=True, blank=True, on_delete=models.CASCADE, related_name="processes"
    )
    mig_device = models.ForeignKey(
        "inventory.MigDevice",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="processes",
    )
    gpu_uuid = models.CharField(max_length=128, blank=True, default="")
    pid = models.PositiveIntegerField()
    process_name = models.CharField(max_length=256, blank=True, default="")
    used_memory_bytes = models.BigIntegerField(null=True, blank=True)
    scheduler = models.CharField(max_length=16, blank=True, default="")  # slurm, kubernetes
    job_id = models.CharField(max_length=64, blank=True, default="")
    step = models.CharField(max_length=64, blank=True, default="")
    pod_uid = models.CharField(max_length=64, blank=True, default="")
    container = models.CharField(max_length=253, blank=True, default="")
    workload = models.ForeignKey(
        Workload, null=True, blank=True, on_delete=models.SET_NULL, related_name="processes"
    )
    report_id = models.BigIntegerField(null=True, blank=True)
    seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["server_id", "gpu_id", "pid"]
        indexes = [models.Index(fields=["server", "gpu"])]

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.gpu_uuid}"


class PodDevice(models.Model):
    """A device the kubelet's pod-resources API says a container holds, as the server's
    last report saw it."""

    server = models.ForeignKey(
        "inventory.Server", on_delete=models.CASCADE, related_name="pod_devices"
    )
    namespace = models.CharField(max_length=253)
    pod = models.CharField(max_length=253)
    container = models.CharField(max_length=253, blank=True, default="")
    resource = models.CharField(max_length=253)
    device_id = models.CharField(max_length=128)
    report_id = models.BigIntegerField(null=True, blank=True)
    seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["server_id", "namespace", "pod", "container", "device_id"]
        indexes = [models.Index(fields=["namespace", "pod"])]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.pod} {self.device_id}"


class ServerWorkloadView(models.Model):
    """What the server's last report said about its workloads: whether the kubelet's
    pod-resources API answered (no: the backend keeps counts only), and when."""

    server = models.OneToOneField(
        "inventory.Server", on_delete=models.CASCADE, related_name="workload_view"
    )
    report_id = models.BigIntegerField(null=True, blank=True)
    seen_at = models.DateTimeField(default=timezone.now)
    processes_reported = models.BooleanField(default=False)
    pod_resources_available = models.BooleanField(null=True, blank=True)
    pod_resources_error = models.TextField(blank=True, default="")

    def __str__(self) -> str:
        return f"workload view of server {self.server_id}"


class WorkloadSummary(models.Model):
    """Ended workloads past the retention window, summed per cluster, day, user and account
    (their rows and allocations are then deleted)."""

    cluster = models.ForeignKey(
        "clusters.Cluster", on_delete=models.CASCADE, related_name="workload_summaries"
    )
    day = models.DateField()
    kind = models.CharField(max_length=16, choices=WorkloadKind.choices)
    user = models.CharField(max_length=128, blank=True, default="")
    account = models.CharField(max_length=253, blank=True, default="")
    workloads = models.PositiveIntegerField(default=0)
    gpu_seconds = models.BigIntegerField(default=0)
    states = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-day", "cluster_id", "user"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "day", "kind", "user", "account"], name="workload_summary_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.user or '-'}: {self.workloads}"
