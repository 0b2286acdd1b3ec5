"""How well a workload is placed, from plain facts: within each node the worst link between
its GPUs and whether each has a NIC at PIX; across nodes the switch hops, the rails and the
network bandwidth per GPU. Pure: no queries (`placement.workload_verdicts` reads the facts and
judges the verdict against what the fleet could have given).

The rules are the fleet's own, not a second copy: the worst link class is
`inventory.choices.worst_link_class` (what placement chooses GPU sets by) and the hops are
`fabric.places.span_hops` (what placement chooses multi-node answers by): the most switches
between two of its nodes, 0 on one node, 1 under one leaf, 3 through a spine group, 5 beyond;
None when a node is on no known fabric.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabric.places import NOWHERE, Place, span_hops
from inventory.choices import worst_link_class

LINK_WORDS = {
    "NV": "all NVLink",
    "PIX": "through one PCIe switch",
    "PXB": "across PCIe switches",
    "PHB": "through the host bridge",
    "NODE": "across host bridges of one socket",
    "SYS": "across sockets",
}
"""What the worst link between a node's GPUs means, in words."""


@dataclass(frozen=True, slots=True)
class HeldNode:
    """What one node of a workload holds and how it is wired, as plain facts.

    `gpus`: the GPU indices held; `pair_class(a, b)`: the link class between two held indices
    (None: not known); `nic_at_pix`: the held indices with a NIC at PIX distance (None: the
    server's NIC affinity is not known); `nic_gbps`: the sum of the server's NIC link speeds
    (None: not known); `rails`: the fabric rails its NICs are on.
    """

    name: str
    gpus: tuple[int, ...]
    pair_class: Callable[[int, int], str | None] = lambda a, b: None
    nic_at_pix: frozenset[int] | None = None
    place: Place = NOWHERE
    nic_gbps: float | None = None
    rails: frozenset[int] = frozenset()
    models: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Spread:
    """The locality of a workload's GPUs, before any verdict."""

    nodes: int
    gpus: int
    within_node: str | None
    """The worst link between its GPUs on any one node; None for one GPU per node or unknown."""
    within_known: bool
    switch_hops: int | None
    nic_missing: int | None
    """GPUs without a NIC at PIX distance; None when some node's NIC affinity is unknown."""
    rails: tuple[int, ...]
    gbps_per_gpu: float | None
    """The least network bandwidth per GPU over its nodes: NIC Gb/s over the GPUs held there."""
    models: tuple[str, ...]
    leaves: tuple[str, ...] = field(default=())

    @property
    def mixed_models(self) -> bool:
        return len(self.models) > 1


def node_worst_link(node: HeldNode) -> tuple[str | None, bool]:
    """(the worst link among the node's held GPUs, whether every pair's class is known)."""
    classes = [node.pair_class(a, b) for a, b in itertools.combinations(sorted(node.gpus), 2)]
    known = [c for c in classes if c is not None]
    return worst_link_class(known), len(known) == len(classes)


def workload_spread(nodes: Sequence[HeldNode]) -> Spread:
    """Within each node, across the nodes: the facts the verdict and the words are made of."""
    worst: list[str] = []
    all_known = True
    for node in nodes:
        link, known = node_worst_link(node)
        all_known &= known
        if link is not None:
            worst.append(link)
    missing: int | None = 0
    for node in nodes:
        if node.nic_at_pix is None:
            missing = None
            break
        missing = (missing or 0) + sum(1 for g in node.gpus if g not in node.nic_at_pix)
    per_gpu = [n.nic_gbps / len(n.gpus) for n in nodes if n.nic_gbps and n.gpus]
    known_bandwidth = len(per_gpu) == len(nodes) and bool(nodes)
    return Spread(
        nodes=len(nodes),
        gpus=sum(len(n.gpus) for n in nodes),
        within_node=worst_link_class(worst),
        within_known=all_known,
        switch_hops=span_hops([n.place for n in nodes]) if nodes else None,
        nic_missing=missing,
        rails=tuple(sorted(set().union(*(n.rails for n in nodes)))) if nodes else (),
        gbps_per_gpu=round(min(per_gpu), 1) if known_bandwidth else None,
        models=tuple(sorted({m for n in nodes for m in n.models if m})),
        leaves=tuple(sorted({n.place.leaf_name or n.place.leaf or "" for n in nodes} - {""})),
    )


def link_words(link_class: str | None) -> str:
    """`all NVLink`, `across sockets`; '' when not known."""
    if not link_class:
        return ""
    return LINK_WORDS.get("NV" if link_class.startswith("NV") else link_class, link_class)


def spread_words(spread: Spread, per_node: Sequence[int]) -> str:
    """`2 nodes × 8 GPUs under one leaf (leaf-03), all NVLink within each node, 4 rails,
    400 Gb/s per GPU`."""
    sizes = sorted(set(per_node))
    shape = (
        f"{spread.nodes} node{'s' if spread.nodes != 1 else ''} × "
        + ("/".join(str(s) for s in sizes) if sizes else "0")
        + f" GPU{'s' if spread.gpus != 1 else ''}"
    )
    parts = [shape + _across(spread)]
    within = link_words(spread.within_node)
    if within:
        parts.append(f"{within} within {'each node' if spread.nodes > 1 else 'the node'}")
    elif spread.gpus > spread.nodes and not spread.within_known:
        parts.append("links within the node not known")
    if spread.nic_missing:
        parts.append(f"{spread.nic_missing} GPU(s) without a NIC at PIX")
    if spread.nodes > 1 and spread.rails:
        parts.append(f"{len(spread.rails)} rail{'s' if len(spread.rails) != 1 else ''}")
    if spread.nodes > 1 and spread.gbps_per_gpu is not None:
        parts.append(f"{spread.gbps_per_gpu:g} Gb/s per GPU")
    if spread.mixed_models:
        parts.append("mixes GPU models: " + ", ".join(spread.models))
    return ", ".join(parts)


def _across(spread: Spread) -> str:
    if spread.nodes <= 1:
        return ""
    hops = spread.switch_hops
    if hops is None:
        return " (fabric not known)"
    if hops == 1:
        named = f" ({spread.leaves[0]})" if len(spread.leaves) == 1 else ""
        return f" under one leaf{named}"
    if hops == 3:
        return f" on {len(spread.leaves)} leaves under one spine group"
    return f" on {len(spread.leaves)} leaves, {hops} switches apart"


def locality_record(
    spread: Spread,
    per_node: Sequence[int],
    *,
    verdict: str,
    because: str = "",
    better: Sequence[str] = (),
    digest: str = "",
) -> dict[str, Any]:
    """The `locality` contract (DESIGN.md, "Workloads"): `within_node`, `switch_hops`,
    `verdict`, `why`, plus `better` (a better node set, when poorly placed), `mixed_models`,
    and the facts behind them (`nic_missing`, `rails`, `gbps_per_gpu`, `judged_digest`)."""
    why = spread_words(spread, per_node)
    if because:
        why = f"{why}; {because}"
    record: dict[str, Any] = {
        "within_node": spread.within_node,
        "switch_hops": spread.switch_hops,
        "verdict": verdict,
        "why": why,
        "better": list(better),
        "mixed_models": list(spread.models) if spread.mixed_models else [],
        "nic_missing": spread.nic_missing,
        "rails": list(spread.rails),
        "gbps_per_gpu": spread.gbps_per_gpu,
    }
    if digest:
        record["judged_digest"] = digest
    return record
