"""The kubelet's device IDs joined to pod groups: which GPU or MIG device each pod holds (pure).

A pod list says how many GPUs a pod asked for; the agent on the node asks the kubelet's
pod-resources API which devices each container was given (``PodDevice`` rows, read by
``workloads.services.pods.pod_devices_for``). Joining the two turns counts into GPU and
MIG UUIDs, so the apply resolves GPU and MIG rows by UUID. The NVIDIA device plugin names a
time-sliced (or MPS) replica ``GPU-<uuid>::<n>``: that is the GPU itself, shared. With its
``index`` device-ID strategy the IDs are GPU indices (``"3"``), kept as indices. A device no
GPU or MIG device of the node's server has is not invented: it is listed in ``unknown`` so
the caller raises a finding or rejects the report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from clusters.parsers.kubernetes import GPU_RESOURCE, MIG_RESOURCE_PREFIX, SHARED_GPU_RESOURCE
from workloads.records import GpuSlot, JobsSnapshot, NodeAllocation, WorkloadRecord

# (namespace, pod) -> the (resource, device ID) pairs its containers hold.
PodKey = tuple[str, str]
DeviceFacts = Mapping[PodKey, Sequence[tuple[str, str]]]

_REPLICA_SEPARATOR = "::"
_SHARED_SUFFIX = ".shared"


@dataclass(frozen=True, slots=True)
class UnknownDevice:
    """A device ID a pod holds that no GPU or MIG device of its node's server has."""

    node: str
    namespace: str
    pod: str
    resource: str
    device_id: str


@dataclass(frozen=True, slots=True)
class DeviceJoin:
    """Workloads with their allocations' GPUs named, and the device IDs that named none."""

    workloads: tuple[WorkloadRecord, ...]
    unknown: tuple[UnknownDevice, ...] = ()


def is_gpu_resource(resource: str) -> bool:
    """``nvidia.com/gpu``, its ``.shared`` renaming, and every ``nvidia.com/mig-*``."""
    return resource in (GPU_RESOURCE, SHARED_GPU_RESOURCE) or resource.startswith(
        MIG_RESOURCE_PREFIX
    )


def mig_profile(resource: str) -> str | None:
    """The MIG profile a resource names (``nvidia.com/mig-1g.10gb`` -> ``1g.10gb``)."""
    if not resource.startswith(MIG_RESOURCE_PREFIX):
        return None
    profile = resource[len(MIG_RESOURCE_PREFIX) :]
    return profile.removesuffix(_SHARED_SUFFIX) or None


def device_slot(resource: str, device_id: str) -> GpuSlot:
    """One device ID as a GpuSlot: a replica ID (``GPU-…::1``) is its GPU, shared; an ID of
    digits alone is a GPU index (the device plugin's ``index`` strategy)."""
    base, replica, _ = device_id.strip().partition(_REPLICA_SEPARATOR)
    shared = bool(replica) or resource.endswith(_SHARED_SUFFIX)
    if base.isdigit():
        return GpuSlot(index=int(base), gpu_type=resource, shared=shared)
    return GpuSlot(uuid=base, gpu_type=resource, mig_profile=mig_profile(resource), shared=shared)


def _joined(
    allocation: NodeAllocation,
    namespace: str,
    devices: DeviceFacts,
    known: frozenset[str] | None,
) -> tuple[NodeAllocation, list[UnknownDevice]]:
    slots: dict[str, GpuSlot] = {}
    unknown: list[UnknownDevice] = []
    for pod in allocation.pods:
        for resource, device_id in devices.get((namespace, pod), ()):
            if not is_gpu_resource(resource):
                continue
            if not device_id.strip():
                continue
            slot = device_slot(resource, device_id)
            if slot.uuid is not None and known is not None and slot.uuid.lower() not in known:
                unknown.append(UnknownDevice(allocation.node, namespace, pod, resource, device_id))
                continue
            key = slot.uuid.lower() if slot.uuid is not None else str(slot.index)
            if key in slots:
                # The same GPU twice (two replicas, or two pods time-sliced on it): one GPU,
                # shared, named after the first pod that holds it.
                slot = dataclasses.replace(slots[key], shared=True)
            else:
                slot = dataclasses.replace(slot, pod=pod)
            slots[key] = slot
    if not slots:
        return allocation, unknown
    gpus = tuple(sorted(slots.values(), key=lambda s: (s.index or 0, s.uuid or "")))
    counted = max(allocation.gpu_count, sum(1 for s in gpus if not s.shared))
    return dataclasses.replace(allocation, gpus=gpus, gpu_count=counted), unknown


def join_pod_devices(
    workloads: Sequence[WorkloadRecord],
    devices: DeviceFacts,
    known_uuids: Mapping[str, Collection[str]] | None = None,
    *,
    node_sharing: Mapping[str, str] | None = None,
) -> DeviceJoin:
    """Each pod group's allocations with the devices its pods hold on each node.

    ``known_uuids`` maps a node name to the GPU and MIG UUIDs of its server; a node it does
    not name (no bound server) is not checked. A shared slot marks the workload's sharing
    with its node's strategy from ``node_sharing`` (GPU Feature Discovery's
    ``nvidia.com/gpu.sharing-strategy``: ``time-slicing`` or ``mps``, which the device
    plugin's replica IDs do not tell apart), ``time-slicing`` where unknown. Workloads of
    other kinds pass unchanged.
    """
    known = {
        node: frozenset(u.lower() for u in uuids) for node, uuids in (known_uuids or {}).items()
    }
    out: list[WorkloadRecord] = []
    unknown: list[UnknownDevice] = []
    for workload in workloads:
        if workload.kind != "pods" or not devices:
            out.append(workload)
            continue
        allocations: list[NodeAllocation] = []
        for allocation in workload.allocations:
            joined, missing = _joined(
                allocation, workload.account, devices, known.get(allocation.node)
            )
            allocations.append(joined)
            unknown.extend(missing)
        shared = [a.node for a in allocations if any(s.shared for s in a.gpus)]
        strategies = [(node_sharing or {}).get(node, "") for node in shared]
        strategy = next((s for s in strategies if s and s != "none"), "time-slicing")
        out.append(
            dataclasses.replace(
                workload,
                allocations=tuple(allocations),
                gpu_count=max(workload.gpu_count, sum(a.gpu_count for a in allocations)),
                sharing=workload.sharing or (strategy if shared else ""),
            )
        )
    return DeviceJoin(workloads=tuple(out), unknown=tuple(unknown))


def snapshot_with_devices(
    snapshot: JobsSnapshot,
    devices: DeviceFacts,
    known_uuids: Mapping[str, Collection[str]] | None = None,
    *,
    node_sharing: Mapping[str, str] | None = None,
) -> tuple[JobsSnapshot, tuple[UnknownDevice, ...]]:
    """A pod snapshot with its device IDs joined, and the IDs that matched nothing."""
    joined = join_pod_devices(snapshot.workloads, devices, known_uuids, node_sharing=node_sharing)
    return dataclasses.replace(snapshot, workloads=joined.workloads), joined.unknown
