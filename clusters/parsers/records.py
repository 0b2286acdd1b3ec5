"""Plain records that every scheduler parser returns.

The parsers read foreign formats (NodeList JSON, ``scontrol`` text, slurmrestd JSON) and
return these records, so storage, reconciliation and the API see one shape whatever the
source. Records are plain data: no Django, no I/O, JSON-serialisable through ``to_dict``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

NodeKind = Literal["kubernetes", "slurm"]

# Formats that parse_snapshot() accepts, named in every SnapshotFormatError so that a
# person who posted the wrong thing learns what to post instead.
ACCEPTED_FORMATS: tuple[str, ...] = (
    "kubectl get nodes -o json (List or NodeList), the API's NodeList, or one Node (JSON or YAML)",
    "kubectl describe node(s) text",
    "scontrol show node text (multi-line or -o one-line, with or without -d)",
    "scontrol show node --json (Slurm 23.02+)",
    "sinfo --json (Slurm 22.05 and 23.02+)",
    "a per-node sinfo listing naming nodes and their GRES, with or without header "
    '(sinfo -N -O NodeList,Partition,Gres,GresUsed,StateLong, or -o "%N %P %G %T")',
    "a slurmrestd nodes response (/slurm/v0.0.38 to v0.0.44 .../nodes)",
)


class SnapshotFormatError(ValueError):
    """The input is not a scheduler snapshot this project reads, or it is broken.

    The message says what was wrong and lists the accepted formats; it never echoes the
    input (a snapshot may be large, and a misdirected paste may hold secrets).
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        accepted = "; ".join(ACCEPTED_FORMATS)
        super().__init__(f"{reason}. Accepted snapshot formats: {accepted}.")


@dataclass(frozen=True, slots=True)
class GresRecord:
    """One Slurm generic resource on a node: ``gpu:h100:8`` is name gpu, type h100, count 8.

    ``used`` is None when the source does not say (plain ``scontrol show node`` has no
    ``GresUsed``; ``-d`` and the JSON formats do). ``mig_profile`` is set when the type
    names a MIG profile (``1g.10gb``, ``nvidia_a100_1g.5gb``).
    """

    name: str
    type: str | None
    count: int
    used: int | None = None
    used_indexes: str | None = None
    mig_profile: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "count": self.count,
            "used": self.used,
            "used_indexes": self.used_indexes,
            "mig_profile": self.mig_profile,
        }


def gres_text(entry: dict[str, Any]) -> str:
    """A stored GRES entry (`GresRecord.to_dict`) as Slurm writes it, with what is used:
    `gpu:h100:8 (4 used: IDX 0-3)`."""
    text = ":".join(str(p) for p in (entry.get("name"), entry.get("type"), entry.get("count")) if p)
    used, indexes = entry.get("used"), entry.get("used_indexes")
    if used is not None:
        text += f" ({used} used" + (f": IDX {indexes})" if used and indexes else ")")
    return text


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A scheduler's node as the scheduler reports it, normalised across formats.

    Identity: Kubernetes gives ``system_uuid`` and ``machine_id`` (both lower-cased here,
    since Kubernetes often upper-cases the UUID and the kernel does not); Slurm gives only
    ``name``, ``hostname`` (NodeHostName) and ``addresses`` (NodeAddr).

    GPU counts follow DESIGN.md exactly: ``gpu_capacity`` is Kubernetes'
    ``status.capacity["nvidia.com/gpu"]`` (0 when absent; MIG and shared resources stay in
    ``resources``/``mig_resources``) or the sum of every Slurm ``gpu`` GRES count, typed or
    not, MIG-typed included. ``gpu_allocatable`` is Kubernetes' allocatable figure (Slurm
    has none: the same as capacity). ``gpu_used`` is Slurm's GresUsed, or None where the
    source does not say (Kubernetes nodes: compute it from pods).

    ``cpus_effective`` is Slurm's ``CPUEfctv`` (``effective_cpus``): the CPUs jobs may use,
    after those a CoreSpecCount/CPUSpecList keeps for the system; None where the source
    does not say (Kubernetes, sinfo listings, scontrol before 22.05).

    ``mig_used`` is the MIG devices in use by profile where the node source says
    (``kubectl describe``'s "Allocated resources"); None where it does not (a node list:
    the pods say).

    ``state`` is normalised: Kubernetes ``ready``/``notready``/``unknown`` from the Ready
    condition; Slurm's base state lower-cased (``idle``, ``mixed``, ``allocated``, ``down``,
    ``error``, ``future``, ``unknown``) with the rest in ``state_flags`` (``drain``,
    ``not_responding``, ``maintenance``, ``powered_down``, ... ; Kubernetes: ``cordoned``,
    ``memory_pressure``, ...). ``raw_state`` keeps the scheduler's own spelling.
    """

    name: str
    kind: NodeKind
    hostname: str | None = None
    addresses: list[str] = field(default_factory=list)
    system_uuid: str | None = None
    machine_id: str | None = None
    state: str = "unknown"
    raw_state: str | None = None
    state_flags: list[str] = field(default_factory=list)
    ready: bool = False
    schedulable: bool = False
    reason: str | None = None
    reason_set_by: str | None = None
    taints: list[dict[str, str]] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)
    features: list[str] = field(default_factory=list)
    cpus: int | None = None
    cpus_effective: int | None = None
    memory_bytes: int | None = None
    gpu_capacity: int = 0
    gpu_allocatable: int = 0
    gpu_used: int | None = None
    gres: list[dict[str, Any]] = field(default_factory=list)
    resources: dict[str, dict[str, int]] = field(default_factory=dict)
    mig_resources: dict[str, int] = field(default_factory=dict)
    mig_used: dict[str, int] | None = None
    mig_label_counts: dict[str, int] = field(default_factory=dict)
    gpu_product: str | None = None
    gpu_count_label: int | None = None
    gpu_memory_label_mib: int | None = None
    gpu_replicas: int | None = None
    sharing_strategy: str | None = None
    mig_strategy: str | None = None
    mig_config: str | None = None
    mig_config_state: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    kubelet_version: str | None = None
    container_runtime: str | None = None
    os_image: str | None = None
    kernel_version: str | None = None
    architecture: str | None = None
    slurm_version: str | None = None
    os: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable copy (for a JSONField or an API payload)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One parsed scheduler snapshot: the whole node set of one cluster at one moment.

    ``format`` names what was detected (``kubernetes-nodelist``, ``kubernetes-node``,
    ``kubernetes-describe``, ``slurm-scontrol-text``, ``slurm-nodes-json``,
    ``slurm-sinfo-json``, ``slurm-sinfo-text``). ``cluster_name`` is set only when the source
    names the cluster (slurmrestd/sinfo metadata of Slurm 23.11+; Kubernetes never does).
    ``source_version`` is the producing version where known (Slurm release, e.g.
    ``22.05.8``), ``api_version`` the JSON layout (``v0.0.38``, ``data_parser/v0.0.43``).
    """

    format: str
    kind: NodeKind
    nodes: list[NodeRecord]
    cluster_name: str | None = None
    source_version: str | None = None
    api_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# The pod labels workloads read to group pods and to name their user and queue (others are
# dropped: a pod's labels are unbounded, these are what grouping needs).
POD_GROUPING_LABELS: tuple[str, ...] = (
    "pod-template-hash",
    "controller-revision-hash",
    "batch.kubernetes.io/job-name",
    "job-name",
    "jobset.sigs.k8s.io/jobset-name",
    "jobset.sigs.k8s.io/replicatedjob-name",
    "training.kubeflow.org/job-name",
    "training.kubeflow.org/replica-type",
    "leaderworkerset.sigs.k8s.io/name",
    "volcano.sh/job-name",
    "kueue.x-k8s.io/queue-name",
    "scheduling.x-k8s.io/pod-group",
    "app.kubernetes.io/name",
    "app.kubernetes.io/created-by",
    "app",
    "user",
)


@dataclass(frozen=True, slots=True)
class PodRecord:
    """A Kubernetes pod reduced to what GPU placement needs.

        ``gpu_requests`` and ``mig_requests`` are the pod's effective requests (Kubernetes
        rules: the larger of the app containers' sum and any one init container; sidecar init
        containers add to the sum). Extended resources cannot be overcommitted, so a limit
        without a request counts as the request. ``holds_resources`` is True while the pod is
        bound to a node and not finished: such a pod occupies its GPUs.

        What grouping pods into workloads needs rides along: ``owner_kind``/``owner_name`` are
        the controller ownerReference (a ReplicaSet, a Job, a PyTorchJob; empty for a lone
        pod), ``labels`` only the keys in ``POD_GROUPING_LABELS`` (a pod may carry hundreds),
        ``reason`` the pod's ``status.reason`` (``Evicted``) and ``terminated_reasons`` what
        its containers' terminated states say (``OOMKilled``, ``Error``), ``finished_at`` when
    its last app container finished. ``gpu_containers``
        names the containers that request GPU or MIG resources, with their amounts, since the
        kubelet names device IDs per container. Times are aware datetimes or None.
    """

    namespace: str
    name: str
    node_name: str | None
    phase: str | None
    gpu_requests: int = 0
    mig_requests: dict[str, int] = field(default_factory=dict)
    extended_requests: dict[str, int] = field(default_factory=dict)
    uid: str = ""
    owner_kind: str = ""
    owner_name: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    priority_class: str = ""
    created_at: datetime | None = None
    start_time: datetime | None = None
    finished_at: datetime | None = None
    reason: str = ""
    terminated_reasons: tuple[str, ...] = ()
    containers: tuple[str, ...] = ()
    gpu_containers: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def holds_resources(self) -> bool:
        return bool(self.node_name) and self.phase not in ("Succeeded", "Failed")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
