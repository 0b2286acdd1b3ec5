"""Kubernetes Node objects: ``kubectl get nodes -o json``, the API's NodeList, one Node.

``kubectl`` prints a ``List`` whose items carry ``kind: Node``; the API answers a
``NodeList`` whose items carry no kind; ``kubectl get node NAME -o json`` prints one
``Node``. All three are read here, from JSON or (``-o yaml``) YAML. GPU facts come from
the NVIDIA device plugin's extended resources (``nvidia.com/gpu``, ``nvidia.com/gpu.shared``,
``nvidia.com/mig-<profile>``) and GPU Feature Discovery labels (``nvidia.com/gpu.*``).
Pods (``kubectl get pods -A -o json``) are read by ``parse_pods`` for GPU use and placement,
with the owner, labels and times that ``workloads`` groups them by.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from clusters.parsers.records import (
    POD_GROUPING_LABELS,
    NodeRecord,
    PodRecord,
    Snapshot,
    SnapshotFormatError,
)
from clusters.parsers.shape import (
    child,
    field,
    mapping,
    objects,
    scalar,
    scalars,
    wrong_type,
)

NODELIST_FORMAT = "kubernetes-nodelist"
NODE_FORMAT = "kubernetes-node"

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"

# Resources every node has; everything else (nvidia.com/gpu, rdma/..., amd.com/gpu) is an
# extended resource and goes into NodeRecord.resources.
_CORE_RESOURCES = frozenset({"cpu", "memory", "pods", "ephemeral-storage", "storage"})

# Taints that say the node itself cannot take work (set by Kubernetes or the autoscaler).
# Other NoSchedule taints (nvidia.com/gpu=present, dedicated=team-a) reserve a node for
# pods that tolerate them; the node still schedules those pods.
_BLOCKING_TAINT_PREFIXES = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")
_BLOCKING_TAINT_KEYS = frozenset({"ToBeDeletedByClusterAutoscaler"})
_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})

_PRESSURE_CONDITIONS = {
    "MemoryPressure": "memory_pressure",
    "DiskPressure": "disk_pressure",
    "PIDPressure": "pid_pressure",
    "NetworkUnavailable": "network_unavailable",
}

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


def mig_counts(amounts: Mapping[str, int]) -> dict[str, int]:
    """MIG devices by profile in a map of resource amounts: ``nvidia.com/mig-1g.10gb: 16``
    -> ``{"1g.10gb": 16}``. The one rule for a node's capacity (NodeList or describe), a
    pod's requests and what describe's "Allocated resources" says pods request."""
    return {
        name[len(MIG_RESOURCE_PREFIX) :]: value
        for name, value in amounts.items()
        if name.startswith(MIG_RESOURCE_PREFIX)
    }


def parse_quantity(value: object) -> Decimal | None:
    """A Kubernetes quantity (``96``, ``7500m``, ``527422416Ki``, ``1e3``) as a Decimal."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if not match:
        return None
    try:
        number = Decimal(match.group(1))
    except InvalidOperation:
        return None
    suffix = match.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix[:1] in ("e", "E"):
        return number * (Decimal(10) ** int(suffix[1:]))
    return number * _DECIMAL[suffix]


def quantity_int(value: object) -> int | None:
    """A quantity rounded down to a whole number (counts, bytes, whole CPUs)."""
    number = parse_quantity(value)
    return int(number) if number is not None else None


def _quantity(amounts: Mapping[str, Any], name: str, path: str) -> int | None:
    """The quantity ``amounts[name]`` (a string, or a number YAML decoded) rounded down."""
    value = amounts.get(name)
    if value is None:
        return None
    finite = not isinstance(value, float) or math.isfinite(value)
    if isinstance(value, bool) or not isinstance(value, str | int | float) or not finite:
        raise wrong_type(child(path, name), "a quantity (a string such as '8' or '7500m')", value)
    number = parse_quantity(value)
    if number is not None and number < 0:  # the API server refuses them; no column holds them
        raise SnapshotFormatError(
            f"{child(path, name)}: a quantity is never negative, got {value!r}"
        )
    return int(number) if number is not None else None


def _label_int(labels: dict[str, str], key: str) -> int | None:
    value = labels.get(key)
    if value is None:
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def gfd_facts(labels: dict[str, str]) -> dict[str, Any]:
    """GPU Feature Discovery facts from a node's labels.

    ``gpu_product`` drops the ``-SHARED`` suffix GFD adds under time-slicing or MPS, so a
    shared A100 still compares equal to the agent's A100 (the sharing itself is in
    ``sharing_strategy`` and ``gpu_replicas``). MIG label counts (``nvidia.com/mig-1g.10gb.count``)
    are kept apart from the MIG *resources* the device plugin advertises.
    """
    product = labels.get("nvidia.com/gpu.product")
    if product and product.endswith("-SHARED"):
        product = product[: -len("-SHARED")]
    driver = labels.get("nvidia.com/cuda.driver-version.full")
    if not driver and labels.get("nvidia.com/cuda.driver.major"):
        parts = [labels.get(f"nvidia.com/cuda.driver.{p}") for p in ("major", "minor", "rev")]
        driver = ".".join(p for p in parts if p)
    cuda = labels.get("nvidia.com/cuda.runtime-version.full")
    if not cuda and labels.get("nvidia.com/cuda.runtime.major"):
        parts = [labels.get(f"nvidia.com/cuda.runtime.{p}") for p in ("major", "minor")]
        cuda = ".".join(p for p in parts if p)
    mig_counts = {}
    for key in labels:
        if key.startswith(MIG_RESOURCE_PREFIX) and key.endswith(".count"):
            profile = key[len(MIG_RESOURCE_PREFIX) : -len(".count")]
            count = _label_int(labels, key)
            if count is not None:
                mig_counts[profile] = count
    return {
        "gpu_product": product or None,
        "gpu_count_label": _label_int(labels, "nvidia.com/gpu.count"),
        "gpu_memory_label_mib": _label_int(labels, "nvidia.com/gpu.memory"),
        "gpu_replicas": _label_int(labels, "nvidia.com/gpu.replicas"),
        "sharing_strategy": labels.get("nvidia.com/gpu.sharing-strategy") or None,
        "mig_strategy": labels.get("nvidia.com/mig.strategy") or None,
        "mig_config": labels.get("nvidia.com/mig.config") or None,
        "mig_config_state": labels.get("nvidia.com/mig.config.state") or None,
        "mig_label_counts": mig_counts,
        "driver_version": driver or None,
        "cuda_version": cuda or None,
    }


def _is_extended(name: object) -> bool:
    text = str(name)
    return text not in _CORE_RESOURCES and not text.startswith("hugepages-")


def _extended_resources(status: dict[str, Any], path: str) -> dict[str, dict[str, int]]:
    capacity = mapping(status, "capacity", path)
    allocatable = mapping(status, "allocatable", path)
    resources: dict[str, dict[str, int]] = {}
    for name in list(capacity) + [n for n in allocatable if n not in capacity]:
        if not _is_extended(name):
            continue
        resources[str(name)] = {
            "capacity": _quantity(capacity, name, child(path, "capacity")) or 0,
            "allocatable": _quantity(allocatable, name, child(path, "allocatable")) or 0,
        }
    return resources


def _conditions(status: dict[str, Any], path: str) -> tuple[str, list[str], str | None]:
    """(state, flags, reason) from the node's conditions."""
    state, reason = "unknown", None
    flags: list[str] = []
    for condition, where in objects(status, "conditions", path):
        kind, value = scalar(condition, "type", where), scalar(condition, "status", where) or ""
        if kind == "Ready":
            state = {"True": "ready", "False": "notready"}.get(value, "unknown")
            if state != "ready":
                parts = [scalar(condition, "reason", where), scalar(condition, "message", where)]
                reason = ": ".join(p for p in parts if p) or None
        elif kind in _PRESSURE_CONDITIONS and value == "True":
            flags.append(_PRESSURE_CONDITIONS[kind])
    return state, flags, reason


def parse_node(node: dict[str, Any], path: str = "") -> NodeRecord:
    """One Kubernetes Node object (already decoded) as a NodeRecord.

    Raises SnapshotFormatError when the object has no ``metadata.name``, or when a field
    has the wrong type (the message names its path under ``path``, ``items[3]``).
    """
    metadata = mapping(node, "metadata", path)
    spec = mapping(node, "spec", path)
    status = mapping(node, "status", path)
    meta_path, spec_path, status_path = (child(path, k) for k in ("metadata", "spec", "status"))
    name = field(metadata, "name", meta_path, str)
    if not name:
        raise SnapshotFormatError(f"a Kubernetes Node has no {child(meta_path, 'name')}")
    labels = scalars(metadata, "labels", meta_path)
    info = mapping(status, "nodeInfo", status_path)
    info_path = child(status_path, "nodeInfo")

    def info_text(key: str) -> str | None:
        return field(info, key, info_path, str) or None

    addresses: list[str] = []
    hostname_address = None
    for entry, where in objects(status, "addresses", status_path):
        address = (scalar(entry, "address", where) or "").strip()
        if address and address not in addresses:
            addresses.append(address)
        if scalar(entry, "type", where) == "Hostname" and address:
            hostname_address = address

    state, flags, reason = _conditions(status, status_path)
    cordoned = bool(field(spec, "unschedulable", spec_path, bool))
    if cordoned:
        flags.insert(0, "cordoned")
    taints: list[dict[str, str]] = []
    for taint, where in objects(spec, "taints", spec_path):
        texts = {k: scalar(taint, k, where) for k in ("key", "value", "effect")}
        taints.append({k: v for k, v in texts.items() if v is not None})
    blocking_taint = any(
        t.get("effect") in _BLOCKING_EFFECTS
        and (
            t.get("key", "").startswith(_BLOCKING_TAINT_PREFIXES)
            or t.get("key") in _BLOCKING_TAINT_KEYS
        )
        for t in taints
    )
    ready = state == "ready"

    capacity = mapping(status, "capacity", status_path)
    allocatable = mapping(status, "allocatable", status_path)
    capacity_path, allocatable_path = (
        child(status_path, "capacity"),
        child(status_path, "allocatable"),
    )
    resources = _extended_resources(status, status_path)
    mig = mig_counts({name: figures["capacity"] for name, figures in resources.items()})
    system_uuid = (scalar(info, "systemUUID", info_path) or "").strip().lower() or None
    machine_id = (scalar(info, "machineID", info_path) or "").strip().lower() or None

    return NodeRecord(
        name=name,
        kind="kubernetes",
        hostname=labels.get("kubernetes.io/hostname") or hostname_address,
        addresses=addresses,
        system_uuid=system_uuid,
        machine_id=machine_id,
        state=state,
        raw_state=state,
        state_flags=flags,
        ready=ready,
        schedulable=ready and not cordoned and not blocking_taint,
        reason=reason,
        taints=taints,
        cpus=_quantity(capacity, "cpu", capacity_path),
        memory_bytes=_quantity(capacity, "memory", capacity_path),
        gpu_capacity=_quantity(capacity, GPU_RESOURCE, capacity_path) or 0,
        gpu_allocatable=_quantity(allocatable, GPU_RESOURCE, allocatable_path) or 0,
        gpu_used=None,
        resources=resources,
        mig_resources=mig,
        labels=labels,
        kubelet_version=info_text("kubeletVersion"),
        container_runtime=info_text("containerRuntimeVersion"),
        os_image=info_text("osImage"),
        kernel_version=info_text("kernelVersion"),
        architecture=info_text("architecture"),
        os=info_text("operatingSystem"),
        **gfd_facts(labels),
    )


def looks_like(document: dict[str, Any]) -> bool:
    """True for a Node, a NodeList, or a List (of Nodes, or empty)."""
    return document.get("kind") in ("Node", "NodeList", "List") and (
        document.get("kind") == "Node" or isinstance(document.get("items"), list)
    )


def parse_kubernetes(document: dict[str, Any]) -> Snapshot:
    """A decoded Node, NodeList or List of Nodes as a Kubernetes snapshot.

    Raises SnapshotFormatError for a List of something else (pods are read by
    ``parse_pods``), for items without names, and for a name listed twice.
    """
    kind = document.get("kind")
    if kind == "Node":
        return Snapshot(format=NODE_FORMAT, kind="kubernetes", nodes=[parse_node(document)])
    items = document.get("items")
    if kind not in ("NodeList", "List") or not isinstance(items, list):
        raise SnapshotFormatError(f"a Kubernetes object of kind {kind!r} is not a node list")
    nodes: list[NodeRecord] = []
    seen: set[str] = set()
    for item, where in objects(document, "items", ""):
        item_kind = item.get("kind", "Node")
        if item_kind != "Node":
            raise SnapshotFormatError(
                f"the list holds {item_kind!r} objects, not Nodes (kubectl get nodes -o json)"
            )
        node = parse_node(item, where)
        if node.name in seen:
            raise SnapshotFormatError(f"the list names node {node.name!r} twice")
        seen.add(node.name)
        nodes.append(node)
    return Snapshot(format=NODELIST_FORMAT, kind="kubernetes", nodes=nodes)


def _container_requests(container: dict[str, Any], path: str) -> dict[str, int]:
    """Extended-resource requests of one container (a limit alone counts as the request)."""
    resources = mapping(container, "resources", path)
    where = child(path, "resources")
    requests = mapping(resources, "requests", where)
    limits = mapping(resources, "limits", where)
    out: dict[str, int] = {}
    for name in list(requests) + [n for n in limits if n not in requests]:
        if not _is_extended(name):
            continue
        if requests.get(name) is not None:
            value = _quantity(requests, name, child(where, "requests"))
        else:
            value = _quantity(limits, name, child(where, "limits"))
        if value:
            out[str(name)] = value
    return out


def _effective_requests(spec: dict[str, Any], path: str) -> dict[str, int]:
    """A pod's effective requests: max(sum of app containers + sidecars, each init)."""
    total: dict[str, int] = {}
    for container, where in objects(spec, "containers", path):
        for name, value in _container_requests(container, where).items():
            total[name] = total.get(name, 0) + value
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for container, where in objects(spec, "initContainers", path):
        requests = _container_requests(container, where)
        if scalar(container, "restartPolicy", where) == "Always":
            for name, value in requests.items():
                sidecars[name] = sidecars.get(name, 0) + value
            continue
        for name, value in requests.items():
            # An init container runs beside the sidecars started before it; approximated
            # by all sidecars, which errs towards holding more, never fewer, GPUs.
            init_peak[name] = max(init_peak.get(name, 0), value + sidecars.get(name, 0))
    for name, value in sidecars.items():
        total[name] = total.get(name, 0) + value
    for name, value in init_peak.items():
        total[name] = max(total.get(name, 0), value)
    return total


def _is_gpu_resource(name: str) -> bool:
    return name == GPU_RESOURCE or name.startswith(MIG_RESOURCE_PREFIX)


def _timestamp(parent: Mapping[str, Any], key: str, path: str) -> datetime | None:
    """An RFC 3339 time (``2024-05-01T10:00:00Z``) as an aware datetime; None when absent."""
    text = field(parent, key, path, str)
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise SnapshotFormatError(f"{child(path, key)}: expected an RFC 3339 time") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _controller(metadata: dict[str, Any], path: str) -> tuple[str, str]:
    """The controller ownerReference's kind and name (the first owner when none is marked
    controller, as some operators leave it unset); empty for a lone pod."""
    owners: list[tuple[str, str]] = []
    for owner, where in objects(metadata, "ownerReferences", path):
        kind = field(owner, "kind", where, str) or ""
        name = field(owner, "name", where, str) or ""
        if field(owner, "controller", where, bool):
            return kind, name
        owners.append((kind, name))
    return owners[0] if owners else ("", "")


def _terminated(status: dict[str, Any], path: str) -> tuple[tuple[str, ...], datetime | None]:
    """What the containers' terminated states say (``OOMKilled``, ``Error``, ``Completed``),
    and when the last app container finished."""
    reasons: list[str] = []
    finished: list[datetime] = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for container, where in objects(status, key, path):
            state_path = child(where, "state")
            terminated = mapping(mapping(container, "state", where), "terminated", state_path)
            where = child(state_path, "terminated")
            reason = field(terminated, "reason", where, str)
            if reason:
                reasons.append(reason)
            at = _timestamp(terminated, "finishedAt", where)
            if at and key == "containerStatuses":
                finished.append(at)
    return tuple(reasons), max(finished) if finished else None


def parse_pod(pod: dict[str, Any], path: str = "") -> PodRecord:
    """One Pod object as a PodRecord (GPU and MIG requests summed the Kubernetes way).

    Raises SnapshotFormatError when a field has the wrong type, naming its path under
    ``path`` (``items[3]``).
    """
    metadata = mapping(pod, "metadata", path)
    spec = mapping(pod, "spec", path)
    status = mapping(pod, "status", path)
    meta_path, spec_path = child(path, "metadata"), child(path, "spec")
    status_path = child(path, "status")
    owner_kind, owner_name = _controller(metadata, meta_path)
    requests = _effective_requests(spec, spec_path)
    mig = mig_counts(requests)
    containers: list[str] = []
    gpu_containers: dict[str, dict[str, int]] = {}
    for key in ("initContainers", "containers"):
        for container, where in objects(spec, key, spec_path):
            name = field(container, "name", where, str) or ""
            if key == "containers":
                containers.append(name)
            gpus = {
                resource: amount
                for resource, amount in _container_requests(container, where).items()
                if _is_gpu_resource(resource)
            }
            if gpus:
                gpu_containers[name] = gpus
    labels = scalars(metadata, "labels", meta_path)
    terminated_reasons, finished_at = _terminated(status, status_path)
    return PodRecord(
        namespace=field(metadata, "namespace", meta_path, str) or "default",
        name=field(metadata, "name", meta_path, str) or "",
        node_name=field(spec, "nodeName", spec_path, str) or None,
        phase=field(status, "phase", status_path, str) or None,
        gpu_requests=requests.get(GPU_RESOURCE, 0),
        mig_requests=mig,
        extended_requests=requests,
        uid=field(metadata, "uid", meta_path, str) or "",
        owner_kind=owner_kind,
        owner_name=owner_name,
        labels={key: labels[key] for key in POD_GROUPING_LABELS if key in labels},
        priority_class=field(spec, "priorityClassName", spec_path, str) or "",
        created_at=_timestamp(metadata, "creationTimestamp", meta_path),
        start_time=_timestamp(status, "startTime", status_path),
        reason=field(status, "reason", status_path, str) or "",
        terminated_reasons=terminated_reasons,
        finished_at=finished_at,
        containers=tuple(containers),
        gpu_containers=gpu_containers,
    )


def parse_pods(document: dict[str, Any]) -> list[PodRecord]:
    """``kubectl get pods -A -o json`` (a List or PodList, or one Pod) as PodRecords."""
    if document.get("kind") == "Pod":
        return [parse_pod(document)]
    items = document.get("items")
    if document.get("kind") not in ("PodList", "List") or not isinstance(items, list):
        raise SnapshotFormatError("not a pod list (kubectl get pods -A -o json)")
    pods = []
    for item, where in objects(document, "items", ""):
        if item.get("kind", "Pod") != "Pod":
            raise SnapshotFormatError(
                f"{where} is not a Pod (the list holds objects that are not Pods)"
            )
        pods.append(parse_pod(item, where))
    return pods


def gpu_used_by_node(pods: list[PodRecord]) -> dict[str, int]:
    """``nvidia.com/gpu`` held per node by pods that are bound and not finished.

    This is Kubernetes' ``gpu_used`` (DESIGN.md: from pods' requests); MIG and shared
    resources are not folded in, as for capacity.
    """
    used: dict[str, int] = {}
    for pod in pods:
        if pod.holds_resources and pod.gpu_requests and pod.node_name:
            used[pod.node_name] = used.get(pod.node_name, 0) + pod.gpu_requests
    return used
