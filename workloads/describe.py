"""A workload in words: its shape, its locality, its allocations grouped by node.

Pure: rows already read in, plain data and text out; no queries. One module, so the API,
the list page, the workload page and the server, node and GPU pages say a workload the same
way ("2 nodes × 8 GPUs = 16", "NVLink within each node, 1 switch between nodes").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class AllocationLike(Protocol):
    node_name: str
    node_id: int | None
    server_id: int | None
    gpu_id: int | None
    mig_device_id: int | None
    index: int | None
    uuid: str
    until: Any


@dataclass
class NodeAllocations:
    """The GPUs a workload holds (or last held) on one node, in the scheduler's order."""

    node: str
    node_id: int | None
    server_id: int | None
    gpus: list[Any] = field(default_factory=list)
    server: Any = None


def shown_allocations(allocations: Sequence[AllocationLike]) -> list[AllocationLike]:
    """What a workload holds now, else (ended, or requeued off every GPU) what it held last.

    A requeued job keeps its earlier allocations as history; only the latest set is its
    placement, so the set ended last (the greatest `until`) is shown.
    """
    held = [a for a in allocations if a.until is None]
    if held or not allocations:
        return held
    last = max(a.until for a in allocations)
    return [a for a in allocations if a.until == last]


def by_node(
    allocations: Iterable[AllocationLike], *, with_server: bool = False
) -> list[NodeAllocations]:
    """One entry per node in first-seen order (the prefetch orders by node name, index).

    `with_server`: the rows carry their server (selected with them), kept for links; off,
    nothing reads `.server`, which would cost a query per node otherwise.
    """
    nodes: dict[str, NodeAllocations] = {}
    for a in allocations:
        entry = nodes.get(a.node_name)
        if entry is None:
            entry = nodes[a.node_name] = NodeAllocations(
                node=a.node_name,
                node_id=a.node_id,
                server_id=a.server_id,
                server=getattr(a, "server", None) if with_server and a.server_id else None,
            )
        entry.gpus.append(a)
    return list(nodes.values())


def _gpus(n: int) -> str:
    return f"{n} GPU{'' if n == 1 else 's'}"


def workload_label(kind: str, scheduler_id: str, user: str = "", gpus: int | None = None) -> str:
    """How every page, finding, alert and webhook names a workload: "job 5679 of alice",
    "pods ml/trainer" (the namespace is in the id), with its GPUs when they matter:
    "job 5679 of alice, 16 GPUs". Plain text: pages escape it."""
    word = "pods" if kind == "pods" else "job"
    text = f"{word} {scheduler_id or '?'}" + (f" of {user}" if user else "")
    return text if gpus is None else f"{text}, {_gpus(gpus)}"


def shape_text(node_count: int, gpu_count: int, gpus_per_node: int | None) -> str:
    """`2 nodes × 8 GPUs = 16`, `1 node × 4 GPUs = 4`; uneven: `3 nodes, 10 GPUs`."""
    if node_count <= 0:
        return _gpus(gpu_count) if gpu_count else "—"
    nodes = f"{node_count} node{'' if node_count == 1 else 's'}"
    if node_count == 1:
        gpus_per_node = gpu_count
    if gpus_per_node is not None and gpus_per_node * node_count == gpu_count:
        return f"{nodes} × {_gpus(gpus_per_node)} = {gpu_count}"
    return f"{nodes}, {_gpus(gpu_count)}"


WITHIN_NODE_TEXT = {
    "PIX": "one PCIe switch",
    "PXB": "several PCIe switches",
    "PHB": "a PCIe host bridge",
    "NODE": "host bridges of one socket",
    "SYS": "across sockets",
}


def within_node_text(link_class: str | None) -> str:
    """The worst link between a workload's GPUs on one node, in words."""
    if not link_class:
        return ""
    if link_class.startswith("NV"):
        return "NVLink"
    return WITHIN_NODE_TEXT.get(link_class, link_class)


def switch_hops_text(hops: int | None, node_count: int) -> str:
    """The most switches between two of its nodes (placement.locality's count: 1 under one
    leaf, 3 through a spine, 5 through a core)."""
    if node_count <= 1:
        return "one node" if node_count == 1 else ""
    if hops is None:
        return "no fabric known between its nodes"
    where = {1: " (one leaf)", 3: " (through a spine)", 5: " (through a core)"}.get(hops, "")
    return f"{hops} switch{'' if hops == 1 else 'es'} between nodes{where}"


def locality_text(locality: Mapping[str, Any], node_count: int) -> str:
    """`NVLink within each node, 1 switch between nodes (one leaf)`."""
    parts = []
    within = within_node_text(locality.get("within_node"))
    if within:
        parts.append(f"{within} within {'each node' if node_count > 1 else 'the node'}")
    hops = switch_hops_text(locality.get("switch_hops"), node_count)
    if hops and node_count > 1:
        parts.append(hops)
    return ", ".join(parts)
