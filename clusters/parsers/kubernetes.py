"""Kubernetes Node objects: ``kubectl get nodes -o json``, the API's NodeList, one Node.

``kubectl`` prints a ``List`` whose items carry ``kind: Node``; the API answers a
``NodeList`` whose items carry no kind; ``kubectl get node NAME -o json`` prints one
``Node``. All three are read here, from JSON or (``-o yaml``) YAML. GPU facts come from
the NVIDIA device plugin's extended resources (``nvidia.com/gpu``, ``nvidia.com/gpu.shared``,
``nvidia.com/mig-<profile>``) and GPU Feature Discovery labels (``nvidia.com/gpu.*``).
Pods (``kubectl get pods -A -o json``) are read by ``parse_pods`` for GPU use and placement.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from clusters.parsers.records import NodeRecord, PodRecord, Snapshot, SnapshotFormatError

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


def _extended_resources(status: dict[str, Any]) -> dict[str, dict[str, int]]:
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or {}
    resources: dict[str, dict[str, int]] = {}
    for name in list(capacity) + [n for n in allocatable if n not in capacity]:
        if name in _CORE_RESOURCES or name.startswith("hugepages-"):
            continue
        resources[name] = {
            "capacity": quantity_int(capacity.get(name)) or 0,
            "allocatable": quantity_int(allocatable.get(name)) or 0,
        }
    return resources


def _conditions(status: dict[str, Any]) -> tuple[str, list[str], str | None]:
    """(state, flags, reason) from the node's conditions."""
    state, reason = "unknown", None
    flags: list[str] = []
    for condition in status.get("conditions") or []:
        if not isinstance(condition, dict):
            continue
        kind, value = condition.get("type"), str(condition.get("status", ""))
        if kind == "Ready":
            state = {"True": "ready", "False": "notready"}.get(value, "unknown")
            if state != "ready":
                parts = [condition.get("reason"), condition.get("message")]
                reason = ": ".join(str(p) for p in parts if p) or None
        elif kind in _PRESSURE_CONDITIONS and value == "True":
            flags.append(_PRESSURE_CONDITIONS[kind])
    return state, flags, reason


def parse_node(node: dict[str, Any]) -> NodeRecord:
    """One Kubernetes Node object (already decoded) as a NodeRecord.

    Raises SnapshotFormatError when the object has no ``metadata.name``.
    """
    metadata = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    name = metadata.get("name")
    if not name or not isinstance(name, str):
        raise SnapshotFormatError("a Kubernetes Node has no metadata.name")
    labels = {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}
    info = status.get("nodeInfo") or {}

    addresses: list[str] = []
    hostname_address = None
    for entry in status.get("addresses") or []:
        address = str(entry.get("address") or "").strip()
        if address and address not in addresses:
            addresses.append(address)
        if entry.get("type") == "Hostname" and address:
            hostname_address = address

    state, flags, reason = _conditions(status)
    cordoned = bool(spec.get("unschedulable"))
    if cordoned:
        flags.insert(0, "cordoned")
    taints = [
        {k: str(t[k]) for k in ("key", "value", "effect") if t.get(k) is not None}
        for t in spec.get("taints") or []
        if isinstance(t, dict)
    ]
    blocking_taint = any(
        t.get("effect") in _BLOCKING_EFFECTS
        and (
            t.get("key", "").startswith(_BLOCKING_TAINT_PREFIXES)
            or t.get("key") in _BLOCKING_TAINT_KEYS
        )
        for t in taints
    )
    ready = state == "ready"

    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or {}
    resources = _extended_resources(status)
    mig = mig_counts({name: figures["capacity"] for name, figures in resources.items()})
    system_uuid = str(info.get("systemUUID") or "").strip().lower() or None
    machine_id = str(info.get("machineID") or "").strip().lower() or None

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
        cpus=quantity_int(capacity.get("cpu")),
        memory_bytes=quantity_int(capacity.get("memory")),
        gpu_capacity=quantity_int(capacity.get(GPU_RESOURCE)) or 0,
        gpu_allocatable=quantity_int(allocatable.get(GPU_RESOURCE)) or 0,
        gpu_used=None,
        resources=resources,
        mig_resources=mig,
        labels=labels,
        kubelet_version=info.get("kubeletVersion") or None,
        container_runtime=info.get("containerRuntimeVersion") or None,
        os_image=info.get("osImage") or None,
        kernel_version=info.get("kernelVersion") or None,
        architecture=info.get("architecture") or None,
        os=info.get("operatingSystem") or None,
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
    for item in items:
        if not isinstance(item, dict):
            raise SnapshotFormatError("a NodeList item is not an object")
        item_kind = item.get("kind", "Node")
        if item_kind != "Node":
            raise SnapshotFormatError(
                f"the list holds {item_kind!r} objects, not Nodes (kubectl get nodes -o json)"
            )
        node = parse_node(item)
        if node.name in seen:
            raise SnapshotFormatError(f"the list names node {node.name!r} twice")
        seen.add(node.name)
        nodes.append(node)
    return Snapshot(format=NODELIST_FORMAT, kind="kubernetes", nodes=nodes)


def _container_requests(container: dict[str, Any]) -> dict[str, int]:
    """Extended-resource requests of one container (a limit alone counts as the request)."""
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    out: dict[str, int] = {}
    for name in set(requests) | set(limits):
        if name in _CORE_RESOURCES or name.startswith("hugepages-"):
            continue
        value = quantity_int(requests.get(name, limits.get(name)))
        if value:
            out[name] = value
    return out


def _effective_requests(spec: dict[str, Any]) -> dict[str, int]:
    """A pod's effective requests: max(sum of app containers + sidecars, each init)."""
    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        for name, value in _container_requests(container).items():
            total[name] = total.get(name, 0) + value
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for container in spec.get("initContainers") or []:
        requests = _container_requests(container)
        if container.get("restartPolicy") == "Always":
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


def parse_pod(pod: dict[str, Any]) -> PodRecord:
    """One Pod object as a PodRecord (GPU and MIG requests summed the Kubernetes way)."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    requests = _effective_requests(spec)
    mig = mig_counts(requests)
    return PodRecord(
        namespace=str(metadata.get("namespace") or "default"),
        name=str(metadata.get("name") or ""),
        node_name=spec.get("nodeName") or None,
        phase=status.get("phase") or None,
        gpu_requests=requests.get(GPU_RESOURCE, 0),
        mig_requests=mig,
        extended_requests=requests,
    )


def parse_pods(document: dict[str, Any]) -> list[PodRecord]:
    """``kubectl get pods -A -o json`` (a List or PodList, or one Pod) as PodRecords."""
    if document.get("kind") == "Pod":
        return [parse_pod(document)]
    items = document.get("items")
    if document.get("kind") not in ("PodList", "List") or not isinstance(items, list):
        raise SnapshotFormatError("not a pod list (kubectl get pods -A -o json)")
    pods = []
    for item in items:
        if not isinstance(item, dict) or item.get("kind", "Pod") != "Pod":
            raise SnapshotFormatError("the list holds objects that are not Pods")
        pods.append(parse_pod(item))
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
