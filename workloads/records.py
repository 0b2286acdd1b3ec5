"""Plain records that every workload source returns (no Django, no I/O).

Slurm's JSON (slurmrestd ``/jobs`` and ``/job/{id}``, ``squeue --json``), ``scontrol show
job -d`` text, accounting (``sacct --json``, slurmdbd) and Kubernetes pod lists are read
into these, so storage, the joins and the API see one shape whatever the source.

A workload is a Slurm job (an array task or a heterogeneous component is its own workload;
steps are not) or a group of pods with one owner. ``allocations`` say, per node, which GPUs
it holds: Slurm's per-node ``IDX`` (``gres_detail``, ``GRES=gpu:h100:4(IDX:0-3)``) or the
kubelet's device IDs; a source that gives only counts (accounting, pods without the
pod-resources view) gives ``gpu_count`` with no ``gpus``, and nothing is ever invented.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

WorkloadKindValue = Literal["slurm_job", "pods"]
StateValue = Literal[
    "pending",
    "running",
    "completed",
    "failed",
    "cancelled",
    "timeout",
    "node_fail",
    "preempted",
    "out_of_memory",
    "unknown",
]

STATES: tuple[str, ...] = (
    "pending",
    "running",
    "completed",
    "failed",
    "cancelled",
    "timeout",
    "node_fail",
    "preempted",
    "out_of_memory",
    "unknown",
)
TERMINAL: frozenset[str] = frozenset(
    {"completed", "failed", "cancelled", "timeout", "node_fail", "preempted", "out_of_memory"}
)

# Slurm's base job states (job_state's first word, or the list's first entry) to ours.
# Suspended, requeued, configuring and completing jobs still hold their nodes: running.
SLURM_STATES: dict[str, str] = {
    "PENDING": "pending",
    "RUNNING": "running",
    "SUSPENDED": "running",
    "CONFIGURING": "running",
    "COMPLETING": "running",
    "RESIZING": "running",
    "REQUEUED": "pending",
    "REQUEUE_HOLD": "pending",
    "REQUEUE_FED": "pending",
    "RESV_DEL_HOLD": "pending",
    "COMPLETED": "completed",
    "FAILED": "failed",
    "BOOT_FAIL": "failed",
    "DEADLINE": "timeout",
    "CANCELLED": "cancelled",
    "REVOKED": "cancelled",
    "TIMEOUT": "timeout",
    "NODE_FAIL": "node_fail",
    "PREEMPTED": "preempted",
    "OUT_OF_MEMORY": "out_of_memory",
    "SPECIAL_EXIT": "failed",
    "STOPPED": "running",
}


def slurm_state(value: str | list[str] | None) -> str:
    """Slurm's job state (``"RUNNING"``, ``["RUNNING", "COMPLETING"]``, ``"CANCELLED by
    1000"``) as one of STATES; ``unknown`` for what Slurm may add later."""
    if isinstance(value, list):
        value = next((v for v in value if isinstance(v, str) and v), "")
    word = (value or "").strip().split(" ")[0].split("+")[0].upper()
    return SLURM_STATES.get(word, "unknown")


class WorkloadFormatError(ValueError):
    """The input is a workload listing this project reads, but broken (cut short, a field
    of the wrong type, an index no node has). ``path`` names where, for a field-level 400;
    the message never echoes the input."""

    def __init__(self, reason: str, path: str = "body") -> None:
        self.reason = reason
        self.path = path
        super().__init__(reason)


@dataclass(frozen=True, slots=True)
class GpuSlot:
    """One GPU (or MIG device) a workload holds on one node.

    ``index`` is the scheduler's index on that node (Slurm's IDX); ``uuid`` the device ID
    the kubelet names (``GPU-…`` or ``MIG-…``); ``gpu_type`` the GRES type (``h100``) or the
    Kubernetes resource (``nvidia.com/mig-1g.10gb``), when the source names one. ``shared``
    marks a GPU the scheduler shares (a time-sliced or MPS replica, a Slurm shard); ``pod``
    names the pod of a pod group that holds it, when the kubelet said.
    """

    index: int | None = None
    uuid: str | None = None
    gpu_type: str | None = None
    mig_profile: str | None = None
    shared: bool = False
    pod: str = ""


@dataclass(frozen=True, slots=True)
class NodeAllocation:
    """What a workload holds on one node: ``gpu_count`` GPUs, of which ``gpus`` are known
    one by one (fewer, or none, when the source gives counts only). ``pods`` names the pods
    of a pod group on this node."""

    node: str
    gpu_count: int = 0
    gpus: tuple[GpuSlot, ...] = ()
    cpus: str | None = None
    pods: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkloadRecord:
    """One workload as one source sees it now.

    ``scheduler_id`` is the contract's: ``"5679"``, ``"5679_12"`` (array task), ``"5680+1"``
    (heterogeneous component), ``"namespace/owner-name"`` (pods). ``gpus_per_node`` and
    ``gpu_count`` are what it asked for (``requested`` keeps the source's own words: TRES,
    GRES, resources); its allocations say what it holds. ``history_only`` marks accounting
    records: counts and times, never indices, and never a GPU held now.
    """

    kind: WorkloadKindValue
    scheduler_id: str
    state: str
    name: str = ""
    user: str = ""
    account: str = ""
    partition: str = ""
    raw_state: str = ""
    submitted_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    node_count: int = 0
    gpu_count: int = 0
    gpus_per_node: int | None = None
    requested: dict[str, Any] = field(default_factory=dict)
    allocations: tuple[NodeAllocation, ...] = ()
    owner_kind: str = ""
    sharing: str = ""
    history_only: bool = False

    @property
    def holds_gpus(self) -> bool:
        """Whether it holds GPUs now: running (or suspended) with GPUs on a node."""
        return (
            not self.history_only
            and self.state == "running"
            and any(a.gpu_count or a.gpus for a in self.allocations)
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class JobsSnapshot:
    """A parsed workload listing.

    ``complete`` is True for a whole listing (``/jobs``, ``squeue --json``, ``scontrol show
    job -d`` of every job, a pod list): a running workload of the cluster it does not name
    has ended. A single job (``/job/{id}``) and accounting (``history``) are not complete.
    A jobs snapshot never changes the node set.
    """

    format: str
    scheduler: Literal["slurm", "kubernetes"]
    workloads: tuple[WorkloadRecord, ...]
    complete: bool = True
    history: bool = False
    source_version: str | None = None
