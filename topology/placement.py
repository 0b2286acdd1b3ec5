"""Where a job fits now, and why: a scheduler request placed on the nodes and GPUs we know.

A request states what a scheduler would be asked. Kubernetes: one pod asking
`nvidia.com/gpu: N` (or `nvidia.com/mig-<profile>: N`) runs on one node; `nodes=K` with
`gpus_per_node=M` is K such pods on K nodes. Slurm: `--nodes=K --gpus-per-node=M`, or
`--gpus=N` spread over as few nodes as possible (16 GPUs on 8-GPU nodes is 2 x 8, never
16 x 1). With no cluster named, every cluster is tried with its own semantics.

What is free comes from the schedulers (allocatable minus used, where they say what is used),
capped by the bound server's healthy GPUs; the GPUs chosen inside a node are the set whose
worst pair link is best (NV# > PIX > PXB > PHB > NODE > SYS), then one NUMA node, then GPUs
with a NIC at PIX distance.

Scale: the fleet is read in a fixed number of queries (`values()` rows; no per-node query)
and everything else is computed in memory, so a query costs the same number of round trips
at 20 nodes and at 25,000.
"""

from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from clusters.choices import ClusterKind
from clusters.findings import model_matches, normalize_mig_profile
from clusters.models import Cluster
from inventory.choices import GpuStatus
from inventory.models import Gpu, Link, MigDevice

from .gpu_sets import NO_PAIRS_RANK, UNKNOWN_RANK, GpuSet, _set_key, best_gpu_set
from .placement_facts import (
    Fleet,
    FleetGpu,
    FleetMig,
    FleetNode,
    fleet_counts,
    fleet_load,
    fleet_merge,
)

BLOCKED_LIMIT = 50
CANDIDATE_LIMIT = 10
ALTERNATIVE_LIMIT = 6

BLOCK_ORDER = (
    "not_ready",
    "not_schedulable",
    "unhealthy_gpu",
    "mig_layout",
    "in_use",
    "too_small",
    "nvlink",
    "numa",
    "memory",
    "model",
)
BLOCK_TEXT = {
    "not_ready": "not ready",
    "not_schedulable": "drained or cordoned",
    "unhealthy_gpu": "with unhealthy or lost GPUs",
    "mig_layout": "with another MIG layout",
    "in_use": "busy",
    "too_small": "too small",
    "nvlink": "without an NVLink-connected set",
    "numa": "without enough GPUs on one NUMA node",
    "memory": "with too little GPU memory",
    "model": "of another GPU model",
}


class PlacementRequestError(ValueError):
    """A request that cannot be read as a scheduler request; `field` names the parameter."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class PlacementRequest:
    """A placement request as given (before it is shaped for a cluster's kind)."""

    cluster: str | None = None
    gpus: int | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    model: str | None = None
    mig_profile: str | None = None
    nvlink_only: bool = False
    min_gpu_memory_bytes: int | None = None
    partition: str | None = None
    same_numa: bool = False

    def as_params(self) -> dict[str, Any]:
        """The API query parameters that ask this request again."""
        params: dict[str, Any] = {
            "cluster": self.cluster,
            "gpus": self.gpus,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "model": self.model,
            "mig_profile": self.mig_profile,
            "nvlink_only": self.nvlink_only or None,
            "min_gpu_memory": self.min_gpu_memory_bytes,
            "partition": self.partition,
            "same_numa": self.same_numa or None,
        }
        return {k: v for k, v in params.items() if v not in (None, "")}


@dataclass(frozen=True)
class Shape:
    """A request shaped for one kind of cluster: `count` nodes x `per_node` GPUs, or a spread.

    `spread` (Slurm `--gpus=N`): `total` GPUs over as few nodes as possible.
    """

    total: int
    count: int | None = None
    per_node: int | None = None
    spread: bool = False

    def describe(self, kind: str, mig_profile: str | None) -> str:
        unit = f"MIG {mig_profile} device" if mig_profile else "GPU"
        if self.spread:
            return f"{self.total} {unit}s over as few nodes as possible"
        if self.count == 1 and kind == ClusterKind.KUBERNETES:
            return f"one pod with {self.per_node} {unit}(s) on one node"
        return f"{self.count} node(s) x {self.per_node} {unit}(s)"


@dataclass
class GpuChoice:
    index: int
    uuid: str
    numa_node: int | None
    mig_uuid: str | None = None
    mig_profile: str | None = None


@dataclass
class NodeChoice:
    """One node of an answer: the GPUs taken there and how they are wired."""

    node: str
    node_id: int
    cluster: str
    kind: str
    server: int | None
    server_hostname: str | None
    gpu_count: int
    free_gpus: int
    gpus: list[GpuChoice] = field(default_factory=list)
    link_class: str | None = None
    numa_nodes: list[int] = field(default_factory=list)
    nics: list[str] = field(default_factory=list)
    in_use_known: bool = True


@dataclass(slots=True)
class BlockedNode:
    node: str
    node_id: int
    cluster: str
    kind: str
    server: int | None
    reason: str
    detail: str


@dataclass
class Alternative:
    """A nearby request that fits now, with the query parameters that ask it."""

    description: str
    cluster: str
    kind: str
    total_gpus: int
    node_count: int
    gpus_per_node: int
    nodes: list[str]
    params: dict[str, Any]


@dataclass
class ClusterAnswer:
    cluster: str
    kind: str
    fits: bool
    request: str
    total_gpus: int
    node_count: int
    reason: str | None


@dataclass
class PlacementResult:
    fits: bool
    total_gpus: int
    requested_gpus: int
    cluster: str | None
    kind: str | None
    nodes: list[NodeChoice]
    reason: str | None
    candidates: list[NodeChoice]
    alternatives: list[Alternative]
    blocked: list[BlockedNode]
    blocked_counts: dict[str, int]
    clusters: list[ClusterAnswer]
    request: dict[str, Any]


# One node against one request -----------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    model: str | None = None
    mig_profile: str | None = None
    nvlink_only: bool = False
    min_gpu_memory_bytes: int | None = None
    partition: str | None = None
    same_numa: bool = False


@dataclass(slots=True)
class _Offer:
    """What one node can give a request: free GPUs (or MIG devices) after the filters."""

    node: FleetNode
    free: int
    gpus: list[FleetGpu] | None
    migs: list[FleetMig] | None = None


@dataclass(slots=True)
class _Option:
    node: FleetNode
    m: int
    gpu_set: GpuSet | None
    free: int
    key: tuple


def _block(node: FleetNode, reason: str, detail: str) -> BlockedNode:
    return BlockedNode(
        node=node.name,
        node_id=node.id,
        cluster=node.cluster,
        kind=node.kind,
        server=node.server_id,
        reason=reason,
        detail=detail,
    )


def _state_block(node: FleetNode) -> BlockedNode | None:
    why = f" ({node.reason})" if node.reason else ""
    if not node.ready:
        state = "NotReady" if node.kind == ClusterKind.KUBERNETES else node.state.upper()
        return _block(node, "not_ready", f"{state}{why}")
    if not node.schedulable:
        flags = "+".join(f.upper() for f in node.state_flags) or "unschedulable"
        text = (
            "cordoned" if node.kind == ClusterKind.KUBERNETES else f"{node.state.upper()}+{flags}"
        )
        return _block(node, "not_schedulable", f"{text}{why}")
    return None


def _alnum(value: str) -> str:
    return re.sub(r"[^a-z0-9]", "", (value or "").lower())


@functools.lru_cache(maxsize=4096)
def gpu_model_matches(query: str, name: str) -> bool:
    """Every word of the query is in the NVML name: `H100` and `h100 80gb hbm3` match
    `NVIDIA H100 80GB HBM3`; `H100 PCIe` does not (the SXM and PCIe parts differ)."""
    words = [w for w in re.split(r"[^a-z0-9]+", query.lower()) if w]
    target = _alnum(name)
    return bool(target) and all(w in target for w in words)


def _products_match(query: str, products: list[str]) -> bool:
    """A node without an agent: its GFD product label or Slurm GRES type (`h100`)."""
    return any(gpu_model_matches(query, p) for p in products) or (
        bool(products) and model_matches(query, products)
    )


def _has_gpus(node: FleetNode) -> bool:
    return bool(node.whole_allocatable or node.mig_allocatable or node.gpus)


def node_offer(node: FleetNode, filters: Filters) -> _Offer | BlockedNode | None:
    """What the node can give under the filters, why it cannot, or None when out of scope.

    Out of scope (None): another partition, or a node with no GPUs at all.
    """
    if filters.partition and filters.partition not in node.partitions:
        return None
    if not _has_gpus(node):
        return None
    if filters.mig_profile:
        return _mig_offer(node, filters)
    known = [g for g in node.gpus if g.problem != "lost"] if node.gpus else []
    if known:
        models = [g for g in known if not filters.model or gpu_model_matches(filters.model, g.name)]
        if not models:
            return _block(node, "model", f"GPUs are {known[0].name}")
    elif filters.model and not _products_match(filters.model, node.products):
        return _block(node, "model", f"GPUs are {', '.join(node.products) or 'unknown'}")
    state = _state_block(node)
    if state:
        return state
    if not known:
        if filters.min_gpu_memory_bytes:
            memory = node.memory_label_bytes
            if memory is None:
                return _block(node, "memory", "GPU memory unknown (no agent on its server)")
            if memory < filters.min_gpu_memory_bytes:
                return _block(node, "memory", f"{memory // 2**30} GiB per GPU")
        return _Offer(node=node, free=node.whole_free, gpus=None)
    eligible = models
    if filters.min_gpu_memory_bytes:
        eligible = [g for g in eligible if (g.memory_bytes or 0) >= filters.min_gpu_memory_bytes]
        if not eligible:
            size = (models[0].memory_bytes or 0) // 2**30
            return _block(node, "memory", f"{size} GiB per GPU")
    busy = (node.busy_indexes or set()) | node.shared_busy
    offered = [g for g in eligible if g.problem is None and not g.mig and g.index not in busy]
    free = min(node.whole_free, len(offered) - node.shared_used)
    return _Offer(node=node, free=max(free, 0), gpus=offered)


def _mig_offer(node: FleetNode, filters: Filters) -> _Offer | BlockedNode:
    profile = filters.mig_profile or ""
    offered_by_scheduler = node.mig_allocatable.get(profile, 0)
    devices = [
        d
        for d in node.migs
        if d.profile == profile
        and not any(g.id == d.gpu_id and g.problem for g in node.gpus)
        and (
            not filters.min_gpu_memory_bytes
            or (d.memory_bytes or 0) >= filters.min_gpu_memory_bytes
        )
    ]
    if filters.model and node.gpus:
        names = {g.id: g.name for g in node.gpus}
        devices = [d for d in devices if gpu_model_matches(filters.model, names.get(d.gpu_id, ""))]
        if not any(gpu_model_matches(filters.model, g.name) for g in node.gpus):
            return _block(node, "model", f"GPUs are {node.gpus[0].name}")
    elif filters.model and not _products_match(filters.model, node.products):
        return _block(node, "model", f"GPUs are {', '.join(node.products) or 'unknown'}")
    if not offered_by_scheduler:
        layout = _layout_text(node.mig_allocatable) or _layout_text(
            Counter(d.profile for d in node.migs)
        )
        detail = f"offers {layout}, not {profile}" if layout else "MIG is off on its GPUs"
        return _block(node, "mig_layout", detail)
    state = _state_block(node)
    if state:
        return state
    free = max(offered_by_scheduler - node.mig_used.get(profile, 0), 0)
    if node.migs:
        free = min(free, len(devices))
    return _Offer(node=node, free=free, gpus=None, migs=devices if node.migs else None)


def _layout_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{n}x {p}" for p, n in sorted(counts.items()) if n)


def option_for(offer: _Offer, m: int, fleet: Fleet, filters: Filters) -> _Option | BlockedNode:
    """The node taking m GPUs of the request, with the GPU set chosen, or why it cannot."""
    node = offer.node
    if offer.free < m:
        return _shortfall(offer, m, filters)
    gpu_set: GpuSet | None = None
    if offer.migs is not None:
        gpu_set = _mig_set(offer, m, fleet)
    elif offer.gpus is not None and node.server_id is not None:
        gpu_set = fleet.best_set(node.server_id, offer.gpus, m, filters)
        if gpu_set is None:
            if filters.nvlink_only:
                return _block(node, "nvlink", f"no {m} of its free GPUs are all NVLink-connected")
            return _block(node, "numa", f"no {m} of its free GPUs share one NUMA node")
    elif m > 1 and (filters.nvlink_only or filters.same_numa):
        reason = "nvlink" if filters.nvlink_only else "numa"
        return _block(node, reason, "interconnect unknown: no agent report from its server")
    if gpu_set is None:
        set_key: tuple = (NO_PAIRS_RANK if m == 1 else UNKNOWN_RANK, 1, 0, 0, ())
    else:
        set_key = gpu_set.key
    in_use_unknown = node.busy_indexes is None and offer.free < len(offer.gpus or [])
    key = (
        set_key[0],
        set_key[1],
        offer.free - m,
        set_key[2],
        in_use_unknown,
        node.cluster,
        node.name,
    )
    return _Option(node=node, m=m, gpu_set=gpu_set, free=offer.free, key=key)


def _mig_set(offer: _Offer, m: int, fleet: Fleet) -> GpuSet | None:
    """MIG devices packed on as few parent GPUs as possible; the set lists the parents."""
    node = offer.node
    per_gpu: dict[int, int] = Counter(d.gpu_id for d in offer.migs or [])
    gpus = {g.id: g for g in node.gpus}
    parents: list[FleetGpu] = []
    taken = 0
    for gpu_id, count in sorted(per_gpu.items(), key=lambda kv: (-kv[1], kv[0])):
        if taken >= m:
            break
        if gpu_id in gpus:
            parents.append(gpus[gpu_id])
        taken += count
    if not parents or node.server_id is None:
        return None
    server_id = node.server_id
    key, worst = _set_key(parents, lambda a, b: fleet.pair_class(server_id, a, b), set())
    return GpuSet(tuple(parents), worst, key)


def _shortfall(offer: _Offer, m: int, filters: Filters) -> BlockedNode:
    """Why a node has fewer than m free: too small, unhealthy GPUs, MIG layout, or in use."""
    node = offer.node
    unit = f"MIG {filters.mig_profile} device(s)" if filters.mig_profile else "GPU(s)"
    if filters.mig_profile:
        total = node.mig_allocatable.get(filters.mig_profile, 0)
        if total < m:
            return _block(
                node, "too_small", f"offers {total} {unit}; the request needs {m} on one node"
            )
        return _block(node, "in_use", f"{offer.free} of {total} {unit} free")
    gpus = node.gpus
    size = max(node.whole_allocatable, len(gpus))
    healthy = [g for g in gpus if g.problem is None]
    problems = Counter(g.problem for g in gpus if g.problem)
    mig = [g for g in healthy if g.mig]
    if size < m and not mig:
        return _block(node, "too_small", f"has {size} GPUs; the request needs {m} on one node")
    if problems and offer.free + sum(problems.values()) >= m:
        text = ", ".join(f"{n} {p}" for p, n in sorted(problems.items()))
        return _block(node, "unhealthy_gpu", f"{offer.free} GPU(s) free; unhealthy: {text}")
    if mig and offer.free + len(mig) >= m:
        return _block(node, "mig_layout", f"{len(mig)} of its GPUs are in MIG mode")
    if node.whole_allocatable < m and node.gpus:
        return _block(
            node, "too_small", f"the scheduler offers {node.whole_allocatable} GPUs; needs {m}"
        )
    used = "" if node.whole_used is None else f" ({node.whole_used} in use"
    shared = len(node.shared_busy) + node.shared_used
    if shared:
        used = (used or " (") + (", " if used else "") + f"{shared} used by another scheduler"
    used += ")" if used else ""
    return _block(node, "in_use", f"{offer.free} of {node.whole_allocatable} GPUs free{used}")


# Shapes and placements ------------------------------------------------------------------


def request_shape(request: PlacementRequest, kind: str) -> Shape:
    """The request as the cluster's scheduler reads it; raises PlacementRequestError."""
    gpus, count, per_node = request.gpus, request.nodes, request.gpus_per_node
    for name, value in (("gpus", gpus), ("nodes", count), ("gpus_per_node", per_node)):
        if value is not None and value < 1:
            raise PlacementRequestError(name, "must be at least 1")
    if request.mig_profile and gpus is None and per_node is None:
        gpus = 1
    if count and per_node:
        if gpus is not None and gpus != count * per_node:
            raise PlacementRequestError("gpus", "gpus must equal nodes x gpus_per_node")
        return Shape(total=count * per_node, count=count, per_node=per_node)
    if per_node:
        if gpus is None:
            return Shape(total=per_node, count=1, per_node=per_node)
        if gpus % per_node:
            raise PlacementRequestError("gpus", "gpus must be a multiple of gpus_per_node")
        return Shape(total=gpus, count=gpus // per_node, per_node=per_node)
    if gpus is None:
        raise PlacementRequestError("gpus", "give gpus, or nodes and gpus_per_node")
    if count:
        if gpus % count:
            raise PlacementRequestError("gpus", "gpus must be a multiple of nodes")
        return Shape(total=gpus, count=count, per_node=gpus // count)
    if kind == ClusterKind.SLURM and not request.mig_profile:
        return Shape(total=gpus, spread=True)
    return Shape(total=gpus, count=1, per_node=gpus)


@dataclass
class _ClusterPlan:
    cluster: str
    kind: str
    shape: Shape
    chosen: list[_Option]
    spare: list[_Option]
    blocked: list[BlockedNode]
    reason: str | None

    @property
    def fits(self) -> bool:
        return self.reason is None

    @property
    def total(self) -> int:
        return sum(o.m for o in self.chosen)

    def key(self) -> tuple:
        worst = max((o.key[0] for o in self.chosen), default=UNKNOWN_RANK)
        leftover = sum(o.free - o.m for o in self.chosen)
        return (len(self.chosen), worst, leftover, self.cluster)


class _Planner:
    """Places shaped requests on a loaded fleet; offers are cached per filter set."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self._offers: dict[Filters, list[_Offer | BlockedNode]] = {}

    def offers(self, filters: Filters) -> list[_Offer | BlockedNode]:
        if filters not in self._offers:
            found = (node_offer(n, filters) for n in self.fleet.nodes)
            self._offers[filters] = [o for o in found if o is not None]
        return self._offers[filters]

    def clusters(self) -> dict[str, str]:
        return {n.cluster: n.kind for n in self.fleet.nodes}

    def plan(self, cluster: str, kind: str, shape: Shape, filters: Filters) -> _ClusterPlan:
        offers = [o for o in self.offers(filters) if _cluster_of(o) == cluster]
        blocked = [o for o in offers if isinstance(o, BlockedNode)]
        live = [o for o in offers if isinstance(o, _Offer)]
        if shape.spread:
            return self._spread(cluster, kind, shape, filters, live, blocked)
        m, count = shape.per_node or 0, shape.count or 1
        options: list[_Option] = []
        for offer in live:
            result = option_for(offer, m, self.fleet, filters)
            if isinstance(result, BlockedNode):
                blocked.append(result)
            else:
                options.append(result)
        options.sort(key=lambda o: o.key)
        if len(options) >= count:
            return _ClusterPlan(
                cluster, kind, shape, options[:count], options[count:], blocked, None
            )
        reason = self._fixed_reason(kind, shape, filters, options, live, blocked)
        return _ClusterPlan(cluster, kind, shape, options, [], blocked, reason)

    def _capacity(self, offer: _Offer, filters: Filters) -> int:
        """The most GPUs one node can give under the filters (NVLink or NUMA may cap it)."""
        if offer.free <= 1 or not (filters.nvlink_only or filters.same_numa):
            return offer.free
        for m in range(offer.free, 0, -1):
            if isinstance(option_for(offer, m, self.fleet, filters), _Option):
                return m
        return 0

    def _spread(
        self,
        cluster: str,
        kind: str,
        shape: Shape,
        filters: Filters,
        live: list[_Offer],
        blocked: list[BlockedNode],
    ) -> _ClusterPlan:
        """Slurm `--gpus=N`: the fewest nodes, the fullest first, the tightest fit last."""
        sized: list[tuple[int, _Offer]] = []
        for offer in live:
            capacity = self._capacity(offer, filters)
            if capacity:
                sized.append((capacity, offer))
            else:
                blocked.append(_shortfall(offer, 1, filters))
        full = {id(o): option_for(o, c, self.fleet, filters) for c, o in sized}
        sized.sort(key=lambda co: (-co[0], _option_key(full[id(co[1])])))
        remaining, chosen = shape.total, []
        prefix = 0
        count = 0
        for capacity, _offer in sized:
            prefix += capacity
            count += 1
            if prefix >= remaining:
                break
        if prefix < remaining or not sized:
            free = sum(c for c, _ in sized)
            within = " (NVLink-connected within each node)" if filters.nvlink_only else ""
            reason = (
                f"needs {shape.total} free GPUs{within}; {free} free on {len(sized)} eligible "
                "node(s)" + _blocked_summary(blocked)
            )
            options = [o for o in full.values() if isinstance(o, _Option)]
            return _ClusterPlan(cluster, kind, shape, [], options, blocked, reason)
        head = sized[: count - 1]
        for capacity, offer in head:
            option = full[id(offer)]
            assert isinstance(option, _Option)
            chosen.append(option)
            remaining -= capacity
        tail: list[_Option] = []
        for capacity, offer in sized[count - 1 :]:
            if capacity >= remaining:
                option = option_for(offer, remaining, self.fleet, filters)
                if isinstance(option, _Option):
                    tail.append(option)
        tail.sort(key=lambda o: o.key)
        chosen.append(tail[0])
        used = {o.node.id for o in chosen}
        spare = [o for o in full.values() if isinstance(o, _Option) and o.node.id not in used]
        spare.sort(key=lambda o: (-o.m, o.key))
        chosen.sort(key=lambda o: (-o.m, o.key))
        return _ClusterPlan(cluster, kind, shape, chosen, spare, blocked, None)

    def _fixed_reason(
        self,
        kind: str,
        shape: Shape,
        filters: Filters,
        options: list[_Option],
        live: list[_Offer],
        blocked: list[BlockedNode],
    ) -> str:
        m, count = shape.per_node or 0, shape.count or 1
        unit = f"MIG {filters.mig_profile} devices" if filters.mig_profile else "free GPUs"
        what = []
        if filters.model:
            what.append(f"model {filters.model}")
        if filters.nvlink_only:
            what.append("NVLink-connected")
        if filters.same_numa:
            what.append("on one NUMA node")
        qualifier = f" ({', '.join(what)})" if what else ""
        best = max(live, key=lambda o: (o.free, o.node.name), default=None)
        most = f"; the most on one node is {best.free} ({best.node.name})" if best else ""
        if count == 1 and kind == ClusterKind.KUBERNETES:
            head = f"a Kubernetes pod runs on one node: no node has {m} {unit}{qualifier}"
        elif count == 1:
            head = f"no node has {m} {unit}{qualifier}"
        else:
            head = f"needs {count} nodes with {m} {unit} each{qualifier}; {len(options)} have"
        return head + most + _blocked_summary(blocked)


def _option_key(option: _Option | BlockedNode) -> tuple:
    return option.key if isinstance(option, _Option) else (UNKNOWN_RANK + 1,)


def _cluster_of(offer: _Offer | BlockedNode) -> str:
    return offer.cluster if isinstance(offer, BlockedNode) else offer.node.cluster


def _blocked_summary(blocked: Iterable[BlockedNode]) -> str:
    counts = Counter(b.reason for b in blocked if b.reason != "model")
    if not counts:
        return ""
    parts = [f"{counts[r]} {BLOCK_TEXT[r]}" for r in BLOCK_ORDER if counts.get(r)]
    return "; nodes excluded: " + ", ".join(parts)


# The service ----------------------------------------------------------------------------


def placement_find(
    *,
    cluster: str | None = None,
    gpus: int | None = None,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    model: str | None = None,
    mig_profile: str | None = None,
    nvlink_only: bool = False,
    min_gpu_memory_bytes: int | None = None,
    partition: str | None = None,
    same_numa: bool = False,
) -> PlacementResult:
    """Where the request fits now, best first; why not, what would fit instead, what blocks.

    Reads the fleet in a fixed number of queries (see `fleet_load`) and places in memory.
    Raises PlacementRequestError for a request that is not well formed.
    """
    profile = None
    if mig_profile:
        profile = normalize_mig_profile(mig_profile)
        if not profile:
            raise PlacementRequestError("mig_profile", "a MIG profile such as 1g.10gb or 3g.40gb")
    request = PlacementRequest(
        cluster=cluster or None,
        gpus=gpus,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        model=model or None,
        mig_profile=profile,
        nvlink_only=nvlink_only,
        min_gpu_memory_bytes=min_gpu_memory_bytes,
        partition=partition or None,
        same_numa=same_numa,
    )
    for kind in ClusterKind.values:
        request_shape(request, kind)  # validate before touching the database
    fleet = fleet_load(cluster=request.cluster, with_mig=bool(profile))
    planner = _Planner(fleet)
    plans = _plans(planner, request)
    fitting = sorted((p for p in plans if p.fits), key=lambda p: p.key())
    best = fitting[0] if fitting else None
    blocked = [b for p in plans for b in p.blocked]
    if best:
        reason = None
        chosen = best.chosen
        spare = _candidates(best, fitting[1:])
    else:
        reason = _reason(request, plans)
        chosen = []
        spare = []
    alternatives: list[Alternative] = []
    if not best:
        # other clusters are alternatives too: read them (a fixed number of queries more)
        whole = planner
        if request.cluster:
            others = fleet_load(other_than=request.cluster, with_mig=bool(profile))
            whole = _Planner(fleet_merge(fleet, others))
        alternatives = _alternatives(whole, request)
    _load_details(fleet, chosen + spare)
    filters = _filters(request)
    return PlacementResult(
        fits=best is not None,
        total_gpus=sum(o.m for o in chosen),
        requested_gpus=(best.shape.total if best else _requested_total(request)),
        cluster=best.cluster if best else request.cluster,
        kind=best.kind if best else None,
        nodes=[_choice(o, fleet, filters) for o in chosen],
        reason=reason,
        candidates=[_choice(o, fleet, filters) for o in spare],
        alternatives=alternatives,
        blocked=_blocked_list(blocked),
        blocked_counts=dict(Counter(b.reason for b in blocked)),
        clusters=[
            ClusterAnswer(
                cluster=p.cluster,
                kind=p.kind,
                fits=p.fits,
                request=p.shape.describe(p.kind, request.mig_profile),
                total_gpus=p.total if p.fits else 0,
                node_count=len(p.chosen) if p.fits else 0,
                reason=p.reason,
            )
            for p in plans
        ],
        request=request.as_params(),
    )


def _filters(request: PlacementRequest) -> Filters:
    return Filters(
        model=request.model,
        mig_profile=request.mig_profile,
        nvlink_only=request.nvlink_only,
        min_gpu_memory_bytes=request.min_gpu_memory_bytes,
        partition=request.partition,
        same_numa=request.same_numa,
    )


def _requested_total(request: PlacementRequest) -> int:
    return request_shape(request, ClusterKind.KUBERNETES).total


def _plans(planner: _Planner, request: PlacementRequest) -> list[_ClusterPlan]:
    filters = _filters(request)
    return [
        planner.plan(name, kind, request_shape(request, kind), filters)
        for name, kind in sorted(planner.clusters().items())
        if not request.cluster or name == request.cluster
    ]


def _reason(request: PlacementRequest, plans: list[_ClusterPlan]) -> str:
    if not plans:
        if request.cluster:
            return f"no cluster {request.cluster!r} with nodes (post a snapshot of it first)"
        return "no scheduler nodes known (post a Kubernetes or Slurm snapshot first)"
    if len(plans) == 1:
        return plans[0].reason or ""
    return "fits in no cluster: " + "; ".join(f"{p.cluster}: {p.reason}" for p in plans)


def _candidates(best: _ClusterPlan, others: list[_ClusterPlan]) -> list[_Option]:
    """More nodes that could take the request (or a share of it), any cluster, best first."""
    spare = list(best.spare)
    for plan in others:
        spare.extend(plan.chosen + plan.spare)
    if best.shape.spread:
        spare.sort(key=lambda o: (-o.m, o.key))
    else:
        spare.sort(key=lambda o: o.key)
    return spare[:CANDIDATE_LIMIT]


def _blocked_list(blocked: list[BlockedNode]) -> list[BlockedNode]:
    order = {r: i for i, r in enumerate(BLOCK_ORDER)}
    seen: set[int] = set()
    unique = []
    for b in sorted(blocked, key=lambda b: (order.get(b.reason, 99), b.cluster, b.node)):
        if b.node_id not in seen and b.reason != "model":
            seen.add(b.node_id)
            unique.append(b)
    return unique[:BLOCKED_LIMIT]


def _alternatives(planner: _Planner, request: PlacementRequest) -> list[Alternative]:
    """Nearby requests that fit now, the closest of each kind: the same GPUs on more nodes,
    fewer GPUs per node, another model, another cluster, fewer constraints."""
    clusters = planner.clusters()
    kinds = {k for c, k in clusters.items() if not request.cluster or c == request.cluster}
    shapes = [request_shape(request, k) for k in kinds or {ClusterKind.KUBERNETES}]
    total = max(s.total for s in shapes)
    per_node = max((s.per_node or s.total) for s in shapes)
    count = max((s.count or 1) for s in shapes)
    unit = f"MIG {request.mig_profile} devices" if request.mig_profile else "GPUs"
    base = replace(request, gpus=None, nodes=None, gpus_per_node=None)
    groups: list[list[tuple[str, PlacementRequest]]] = [
        [
            (
                f"{total} {unit} as {total // m} nodes x {m}",
                replace(base, nodes=total // m, gpus_per_node=m),
            )
            for m in range(per_node - 1, 0, -1)
            if total % m == 0 and total // m > 1
        ],
        [
            (
                f"{count} node(s) x {m} {unit} (fewer per node)",
                replace(base, nodes=count, gpus_per_node=m),
            )
            for m in range(per_node - 1, 0, -1)
        ],
    ]
    if request.model:
        groups += [
            [(f"the same request on {model}", replace(request, model=model))]
            for model in _models(planner.fleet)
            if not gpu_model_matches(request.model, model)
        ]
    if request.cluster:
        groups += [
            [(f"the same request in {name}", replace(request, cluster=name))]
            for name in sorted(clusters)
            if name != request.cluster
        ]
    relaxed = (
        ("without NVLink-only", request.nvlink_only, {"nvlink_only": False}),
        ("without one NUMA node", request.same_numa, {"same_numa": False}),
        (
            "without a GPU memory minimum",
            request.min_gpu_memory_bytes,
            {"min_gpu_memory_bytes": None},
        ),
        ("in any partition", request.partition, {"partition": None}),
    )
    groups += [
        [(f"the same request {name}", replace(request, **change))]
        for name, given, change in relaxed
        if given
    ]
    found: list[Alternative] = []
    seen: set[tuple] = set()
    for group in groups:
        alternative = _first_fit(planner, group)
        signature = alternative and (
            alternative.cluster,
            alternative.total_gpus,
            *alternative.nodes,
        )
        if alternative and signature not in seen:
            seen.add(signature)
            found.append(alternative)
        if len(found) >= ALTERNATIVE_LIMIT:
            break
    return found


def _first_fit(planner: _Planner, tries: list[tuple[str, PlacementRequest]]) -> Alternative | None:
    for description, attempt in tries:
        fitting = sorted((p for p in _plans(planner, attempt) if p.fits), key=lambda p: p.key())
        if not fitting:
            continue
        plan = fitting[0]
        return Alternative(
            description=f"{description} ({plan.cluster}, {plan.kind})",
            cluster=plan.cluster,
            kind=plan.kind,
            total_gpus=plan.total,
            node_count=len(plan.chosen),
            gpus_per_node=max(o.m for o in plan.chosen),
            nodes=[o.node.name for o in plan.chosen],
            params={**attempt.as_params(), "cluster": plan.cluster},
        )
    return None


def _models(fleet: Fleet) -> list[str]:
    """GPU models present, one spelling each (NVML names before scheduler labels)."""
    names: dict[str, str] = {}
    for node in fleet.nodes:
        for gpu in node.gpus:
            if gpu.name:
                names.setdefault(_alnum(gpu.name), gpu.name)
    for node in fleet.nodes:
        if not node.gpus and node.products:
            product = node.products[0]
            if not any(gpu_model_matches(product, n) for n in names.values()):
                names.setdefault(_alnum(product), product)
    return sorted(names.values())


def _load_details(fleet: Fleet, options: list[_Option]) -> None:
    """GPU UUIDs and NICs at PIX distance for the nodes in the answer: two queries."""
    servers = {o.node.server_id for o in options if o.node.server_id is not None}
    if not servers:
        return
    nic_pix: dict[int, list[str]] = defaultdict(list)
    for gpu_id, nic in (
        Link.objects.filter(server_id__in=servers, nic__isnull=False, link_class="PIX")
        .order_by("nic__name")
        .values_list("gpu_a_id", "nic__name")
    ):
        nic_pix[gpu_id].append(nic)
    fleet.nic_pix = dict(nic_pix)
    fleet.uuids = dict(Gpu.objects.filter(server_id__in=servers).values_list("id", "uuid"))


def _choice(option: _Option, fleet: Fleet, filters: Filters) -> NodeChoice:
    """The answer's row for one node; the GPU set is chosen again with NIC affinity known."""
    node = option.node
    gpu_set = option.gpu_set
    if gpu_set is not None and not filters.mig_profile and node.server_id is not None:
        offer = node_offer(node, filters)
        if isinstance(offer, _Offer):
            again = option_for(offer, option.m, fleet, filters)
            if isinstance(again, _Option) and again.gpu_set is not None:
                gpu_set = again.gpu_set
    uuids = fleet.uuids
    gpus: list[GpuChoice] = []
    if gpu_set is not None and filters.mig_profile:
        parents = {g.id: g for g in gpu_set.gpus}
        devices = [d for d in node.migs if d.profile == filters.mig_profile and d.gpu_id in parents]
        devices.sort(key=lambda d: (list(parents).index(d.gpu_id), d.uuid))
        for device in devices[: option.m]:
            parent = parents[device.gpu_id]
            gpus.append(
                GpuChoice(
                    index=parent.index,
                    uuid=uuids.get(parent.id, ""),
                    numa_node=parent.numa_node,
                    mig_uuid=device.uuid,
                    mig_profile=device.profile,
                )
            )
    elif gpu_set is not None:
        gpus = [GpuChoice(g.index, uuids.get(g.id, ""), g.numa_node) for g in gpu_set.gpus]
    members = gpu_set.gpus if gpu_set else ()
    nics = sorted({n for g in members for n in fleet.nic_pix.get(g.id, [])})
    return NodeChoice(
        node=node.name,
        node_id=node.id,
        cluster=node.cluster,
        kind=node.kind,
        server=node.server_id,
        server_hostname=node.server_hostname,
        gpu_count=option.m,
        free_gpus=option.free,
        gpus=gpus,
        link_class=gpu_set.link_class if gpu_set else None,
        numa_nodes=sorted({g.numa_node for g in members if g.numa_node is not None}),
        nics=nics,
        in_use_known=not option.key[4],
    )


def node_free_gpus(fleet: Fleet) -> dict[int, int]:
    """Whole GPUs free per schedulable node (no request filters): the largest job that fits.

    Works on `fleet_load` (GPUs known) and on `fleet_counts` (healthy counts only).
    """
    free: dict[int, int] = {}
    for node in fleet.nodes:
        if node.healthy_whole is not None and not node.gpus:
            if _has_gpus(node) and _state_block(node) is None:
                others = node.shared_used + len(node.shared_busy)
                free[node.id] = max(min(node.whole_free, node.healthy_whole - others), 0)
            continue
        offer = node_offer(node, Filters())
        if isinstance(offer, _Offer):
            free[node.id] = offer.free
    return free


def gpu_memory_text(value: str) -> int:
    """`80GB`, `80G`, `40gib`, `81920MiB` or bytes -> bytes; raises PlacementRequestError."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*", value.lower())
    if not match:
        raise PlacementRequestError("min_gpu_memory", "a size such as 40GB, 80GiB or bytes")
    number, unit = float(match.group(1)), (match.group(2) or "").rstrip("b").rstrip("i")
    factor = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[unit]
    if unit == "" and number < 4096:
        factor = 2**30  # "80" means 80 GiB: nobody asks for a GPU with 80 bytes
    return int(number * factor)


__all__ = [
    "Alternative",
    "BlockedNode",
    "ClusterAnswer",
    "Fleet",
    "GpuChoice",
    "NodeChoice",
    "PlacementRequest",
    "PlacementRequestError",
    "PlacementResult",
    "best_gpu_set",
    "fleet_counts",
    "fleet_load",
    "gpu_memory_text",
    "node_free_gpus",
    "placement_choices",
    "placement_find",
    "request_shape",
]


def placement_choices() -> dict[str, list[str]]:
    """What the placement form offers: cluster names, GPU models, MIG profiles (3 queries)."""
    return {
        "clusters": list(Cluster.objects.order_by("name").values_list("name", flat=True)),
        "models": list(
            Gpu.objects.exclude(status=GpuStatus.LOST)
            .exclude(name="")
            .order_by("name")
            .values_list("name", flat=True)
            .distinct()
        ),
        "mig_profiles": list(
            MigDevice.objects.exclude(profile="")
            .order_by("profile")
            .values_list("profile", flat=True)
            .distinct()
        ),
    }
