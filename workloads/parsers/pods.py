"""Kubernetes pods as workloads: the pods of one owner are one workload (pure).

A pod list (``kubectl get pods -A -o json``, or the pull's PodList) is read by
``clusters.parsers.parse_pods``; this groups the pods that request ``nvidia.com/gpu`` or
``nvidia.com/mig-*`` by the owner a person would name: a batch Job, a JobSet (its child
Jobs), a Kubeflow PyTorchJob/MPIJob/TFJob, a Deployment (through its ReplicaSet), a
StatefulSet, a DaemonSet, a LeaderWorkerSet (its leader and worker StatefulSets), a
Volcano job or any other controller; a pod without one is its own workload. The kubelet's
device IDs are joined later (``workloads.pod_devices``): here GPUs are counts only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from clusters.parsers.kubernetes import GPU_RESOURCE, MIG_RESOURCE_PREFIX
from clusters.parsers.records import PodRecord
from workloads.records import TERMINAL, JobsSnapshot, NodeAllocation, WorkloadRecord

POD_FORMAT = "kubernetes-pods"

# Labels that name a group above the pod's own controller, most specific first: a JobSet's
# child Jobs, a LeaderWorkerSet's StatefulSets, a Kubeflow job's pods (whose controller is
# the training job itself, but an older operator may leave the reference out).
_GROUP_LABELS: tuple[tuple[str, str], ...] = (
    ("jobset.sigs.k8s.io/jobset-name", "JobSet"),
    ("leaderworkerset.sigs.k8s.io/name", "LeaderWorkerSet"),
    ("training.kubeflow.org/job-name", ""),
)
_USER_LABELS = ("user", "app.kubernetes.io/created-by")
_QUEUE_LABELS = ("kueue.x-k8s.io/queue-name",)
_FINISHED = frozenset({"Succeeded", "Failed"})
# A pod's owner that is not a controller of pods (a mirror pod's Node): a lone pod.
_NOT_GROUPS = frozenset({"", "Node"})


@dataclass(frozen=True, slots=True)
class Owner:
    """Whom a pod belongs to, as a workload: ``kind`` and ``name`` in its namespace."""

    namespace: str
    kind: str
    name: str


def pod_gpus(pod: PodRecord) -> int:
    """The GPUs a pod requests: whole GPUs plus MIG devices (each MIG device is one)."""
    return pod.gpu_requests + sum(pod.mig_requests.values())


def requests_gpus(pod: PodRecord) -> bool:
    """Whether the pod asks for ``nvidia.com/gpu`` or any ``nvidia.com/mig-*``."""
    return any(
        name == GPU_RESOURCE or name.startswith(MIG_RESOURCE_PREFIX)
        for name, value in pod.extended_requests.items()
        if value
    )


def pod_owner(pod: PodRecord) -> Owner:
    """The workload a pod belongs to.

    A group label wins over the controller (a JobSet's pods are owned by its child Jobs);
    a ReplicaSet stands for its Deployment when the pod's ``pod-template-hash`` label names
    the suffix to strip (a bare ReplicaSet stays one); a pod without a controller is its
    own workload, kind ``Pod``.
    """
    for label, kind in _GROUP_LABELS:
        name = pod.labels.get(label)
        if name:
            return Owner(pod.namespace, kind or pod.owner_kind or "TrainingJob", name)
    kind, name = pod.owner_kind, pod.owner_name
    if kind in _NOT_GROUPS or not name:
        return Owner(pod.namespace, "Pod", pod.name)
    if kind == "ReplicaSet":
        template_hash = pod.labels.get("pod-template-hash")
        if template_hash and name.endswith(f"-{template_hash}"):
            return Owner(pod.namespace, "Deployment", name[: -len(template_hash) - 1])
    return Owner(pod.namespace, kind, name)


def pod_state(pod: PodRecord) -> str:
    """One pod's state in the contract's words (an evicted pod was preempted; a container
    the kernel killed for memory is out_of_memory)."""
    if pod.phase == "Running":
        return "running"
    if pod.phase == "Pending" or (pod.phase is None and not pod.node_name):
        return "pending"
    if pod.phase == "Succeeded":
        return "completed"
    if pod.phase == "Failed":
        if pod.reason == "Evicted":
            return "preempted"
        if "OOMKilled" in pod.terminated_reasons:
            return "out_of_memory"
        return "failed"
    return "unknown"


# How the pods' states make the group's, first match wins: a group still runs while any pod
# runs; a pod the kubelet lost makes it unknown; then the worst way a pod ended.
_GROUP_ORDER = ("running", "unknown", "out_of_memory", "preempted", "failed")


def group_state(states: Sequence[str]) -> str:
    """A pod group's state from its pods' (``running`` while any runs; ``pending`` while
    some wait and none failed; ``completed`` when all succeeded)."""
    present = set(states)
    for state in _GROUP_ORDER:
        if state in present:
            return state
    return "pending" if "pending" in present else "completed"


def _first_label(pods: Iterable[PodRecord], keys: Sequence[str]) -> str:
    for pod in pods:
        for key in keys:
            if pod.labels.get(key):
                return pod.labels[key]
    return ""


def _raw_state(pods: Sequence[PodRecord]) -> str:
    """The phases as counted (``Running:3,Failed:1``), the scheduler's own words."""
    counts: dict[str, int] = {}
    for pod in pods:
        word = "Evicted" if pod.reason == "Evicted" else (pod.phase or "Unknown")
        counts[word] = counts.get(word, 0) + 1
    return ",".join(f"{word}:{n}" for word, n in sorted(counts.items()))


def _allocations(pods: Sequence[PodRecord]) -> tuple[NodeAllocation, ...]:
    """One allocation per node: the GPUs its pods there request, and their names."""
    by_node: dict[str, list[PodRecord]] = {}
    for pod in pods:
        if pod.node_name:
            by_node.setdefault(pod.node_name, []).append(pod)
    return tuple(
        NodeAllocation(
            node=node,
            gpu_count=sum(pod_gpus(p) for p in on_node),
            pods=tuple(sorted(p.name for p in on_node)),
        )
        for node, on_node in sorted(by_node.items())
    )


def _gpu_resources(pods: Iterable[PodRecord]) -> dict[str, int]:
    total: dict[str, int] = {}
    for pod in pods:
        for name, value in pod.extended_requests.items():
            if name == GPU_RESOURCE or name.startswith(MIG_RESOURCE_PREFIX):
                total[name] = total.get(name, 0) + value
    return dict(sorted(total.items()))


def group_workload(owner: Owner, pods: Sequence[PodRecord], scheduler_id: str) -> WorkloadRecord:
    """One pod group as a WorkloadRecord.

    Its GPUs are those of its live pods (bound or waiting, not finished): a Deployment's
    evicted pod left behind holds nothing. A group whose pods have all finished keeps
    where they ran, so its history names the nodes; its terminal state says it holds
    nothing now, and its end is when its last container finished.
    """
    live = [p for p in pods if p.phase not in _FINISHED]
    chosen = live or list(pods)
    allocations = _allocations(chosen)
    per_pod = {pod_gpus(p) for p in chosen}
    starts = [p.start_time for p in pods if p.start_time]
    created = [p.created_at for p in pods if p.created_at]
    state = group_state([pod_state(p) for p in pods])
    finished = [p.finished_at for p in pods if p.finished_at]
    ended = max(finished) if state in TERMINAL and not live and finished else None
    return WorkloadRecord(
        kind="pods",
        scheduler_id=scheduler_id,
        state=state,
        name=owner.name,
        user=_first_label(pods, _USER_LABELS),
        account=owner.namespace,
        partition=_first_label(pods, _QUEUE_LABELS)
        or next((p.priority_class for p in pods if p.priority_class), ""),
        raw_state=_raw_state(pods),
        submitted_at=min(created) if created else None,
        started_at=min(starts) if starts else None,
        ended_at=ended,
        node_count=len(allocations),
        gpu_count=sum(pod_gpus(p) for p in chosen),
        requested={
            "gpus_per_pod": per_pod.pop() if len(per_pod) == 1 else None,
            "pods": len(chosen),
            "resources": _gpu_resources(chosen),
            # what the GPUs' processes name (their cgroup paths carry the pod's UID)
            "pod_uids": sorted(p.uid for p in chosen if p.uid),
        },
        allocations=allocations,
        owner_kind=owner.kind,
    )


def pods_to_workloads(pods: Sequence[PodRecord]) -> JobsSnapshot:
    """The GPU pods of a whole pod list as workloads, one per owner (a complete listing:
    a pod group it does not name has ended).

    ``scheduler_id`` is ``namespace/owner-name``; should two owners of different kinds
    share a name in one namespace (a Deployment and a StatefulSet both ``web``), the one
    whose kind sorts first keeps it and the others become ``namespace/Kind/name``.
    """
    groups: dict[Owner, list[PodRecord]] = {}
    for pod in pods:
        if requests_gpus(pod):
            groups.setdefault(pod_owner(pod), []).append(pod)
    taken: set[str] = set()
    workloads: list[WorkloadRecord] = []
    for owner in sorted(groups, key=lambda o: (o.namespace, o.name, o.kind)):
        scheduler_id = f"{owner.namespace}/{owner.name}"
        if scheduler_id in taken:
            scheduler_id = f"{owner.namespace}/{owner.kind}/{owner.name}"
        taken.add(scheduler_id)
        members = sorted(groups[owner], key=lambda p: p.name)
        workloads.append(group_workload(owner, members, scheduler_id))
    return JobsSnapshot(
        format=POD_FORMAT,
        scheduler="kubernetes",
        workloads=tuple(workloads),
        complete=True,
    )
