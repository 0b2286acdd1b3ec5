"""The planner: a shaped request placed on a fleet already read, in memory. Pure: no queries.

What is free comes from the schedulers (allocatable minus used, where they say what is used),
capped by the bound server's healthy GPUs (`inventory.health`); the GPUs chosen inside a node
are the set whose worst pair link is best (`gpu_sets`). Each node either offers GPUs to the
request (`node_offer`, `option_for`) or is blocked with a reason; each cluster's plan takes
the best-ranked options (`Ranking`), or says why it cannot.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from copy import copy
from dataclasses import dataclass, replace
from operator import attrgetter, itemgetter

from clusters.choices import ClusterKind
from inventory.gpu_models import gpu_model_matches, gpu_models_agree
from inventory.health import GpuProblem

from .facts import Fleet, FleetGpu, FleetMig, FleetNode
from .gpu_sets import NO_PAIRS_RANK, UNKNOWN_RANK, GpuSet, SetRank, set_rank
from .locality import (
    LEVELS,
    NOWHERE,
    Locality,
    Place,
    between,
    choose_local,
    describe,
    locality_of,
)
from .types import (
    BlockedNode,
    Filters,
    GpuChoice,
    NeedingAction,
    NodeChoice,
    PlacementRequest,
    PlanRank,
    Ranking,
    Shape,
    mig_profile_is_prefix,
    mig_profile_matches,
    request_shape,
)

BLOCK_ORDER = (
    "not_ready",
    "not_schedulable",
    "unhealthy_gpu",
    "needs_action",
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
    "needs_action": "with GPUs needing action (drain, reset or RMA)",
    "mig_layout": "with another MIG layout",
    "in_use": "busy",
    "too_small": "too small",
    "nvlink": "without an NVLink-connected set",
    "numa": "without enough GPUs on one NUMA node",
    "memory": "with too little GPU memory",
    "model": "of another GPU model",
}

EXCLUDING = frozenset({"not_ready", "not_schedulable", "unhealthy_gpu", "needs_action"})
"""Why a node is out whatever is asked of it: its state, or the health of its GPUs (the other
reasons are about the request: too small for it, busy, another layout). A node an answer
blocks for one of these is in none of its alternatives (`excluded_nodes`)."""


BLOCKED_RANK = Ranking(UNKNOWN_RANK + 1, 0, 0, 0, False, "", "")
"""Ranks a node that cannot take its share after every node that can."""
BLOCKED_LIMIT = 50
"""Blocked nodes an answer lists (all are counted)."""
CANDIDATE_LIMIT = 10
"""Nodes an answer offers beside those chosen."""


# One node against one request -----------------------------------------------------------


@dataclass(slots=True)
class Offer:
    """What one node can give a request: free GPUs (or MIG devices) after the filters."""

    node: FleetNode
    free: int
    gpus: list[FleetGpu] | None
    migs: list[FleetMig] | None = None


@dataclass(slots=True)
class Option:
    """The node taking `m` GPUs of the request: the set chosen and how it ranks."""

    node: FleetNode
    m: int
    gpu_set: GpuSet | None
    free: int
    rank: Ranking


def _block(node: FleetNode, reason: str, detail: str) -> BlockedNode:
    return BlockedNode(
        node=node.name,
        node_id=node.id,
        cluster=node.cluster,
        kind=node.kind,
        server=node.server_id,
        reason=reason,
        detail=detail,
        gpus_needing_action=node.gpus_needing_action,
        twins=node.twins,
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


def _products_match(query: str, products: list[str]) -> bool:
    """A node without an agent: its GFD product label or Slurm GRES type (`h100`)."""
    return any(gpu_models_agree(query, p) for p in products)


def _has_gpus(node: FleetNode) -> bool:
    return bool(node.whole_allocatable or node.mig_allocatable or node.gpus)


def node_offer(node: FleetNode, filters: Filters) -> Offer | BlockedNode | None:
    """What the node can give under the filters, why it cannot, or None when out of scope.

    Out of scope (None): another partition, or a node with no GPUs at all.
    """
    if filters.partition and filters.partition not in node.partitions:
        return None
    if not _has_gpus(node):
        return None
    if filters.mig_profile:
        return _mig_offer(node, filters)
    known = [g for g in node.gpus if g.problem != GpuProblem.LOST] if node.gpus else []
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
        return Offer(node=node, free=node.whole_free, gpus=None)
    eligible = models
    if filters.min_gpu_memory_bytes:
        eligible = [g for g in eligible if (g.memory_bytes or 0) >= filters.min_gpu_memory_bytes]
        if not eligible:
            size = (models[0].memory_bytes or 0) // 2**30
            return _block(node, "memory", f"{size} GiB per GPU")
    busy = (node.busy_indexes or set()) | node.shared_busy
    offered = [
        g
        for g in eligible
        if g.problem is None and g.action is None and not g.mig and g.index not in busy
    ]
    free = min(node.whole_free, len(offered) - node.shared_used)
    return Offer(node=node, free=max(free, 0), gpus=offered)


def _mig_offer(node: FleetNode, filters: Filters) -> Offer | BlockedNode:
    profile = filters.mig_profile or ""
    offered_by_scheduler = node.mig_allocatable.get(profile, 0)
    devices = [
        d
        for d in node.migs
        if d.profile == profile
        and not any(g.id == d.gpu_id and not g.usable for g in node.gpus)
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
    return Offer(node=node, free=free, gpus=None, migs=devices if node.migs else None)


def _layout_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{n}x {p}" for p, n in sorted(counts.items()) if n)


def option_for(offer: Offer, m: int, fleet: Fleet, filters: Filters) -> Option | BlockedNode:
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
        unknown = NO_PAIRS_RANK if m == 1 else UNKNOWN_RANK
        set_of = SetRank(link_rank=unknown, numa_nodes=1, nic_missing=0, link_total=0, indexes=())
    else:
        set_of = gpu_set.rank
    rank = Ranking(
        link_rank=set_of.link_rank,
        numa_nodes=set_of.numa_nodes,
        leftover=offer.free - m,
        nic_missing=set_of.nic_missing,
        in_use_unknown=node.busy_indexes is None and offer.free < len(offer.gpus or []),
        cluster=node.cluster,
        node=node.name,
    )
    return Option(node=node, m=m, gpu_set=gpu_set, free=offer.free, rank=rank)


def _mig_set(offer: Offer, m: int, fleet: Fleet) -> GpuSet | None:
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
    rank, worst = set_rank(parents, lambda a, b: fleet.pair_class(server_id, a, b), set())
    return GpuSet(tuple(parents), worst, rank)


def _shortfall(offer: Offer, m: int, filters: Filters) -> BlockedNode:
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
    # one pass, plain dicts: a question that fits nowhere asks this of every node
    problems: dict[str, int] = {}
    actions: dict[str, int] = {}  # needing action, healthy by their counters: not `problems`
    mig: list[FleetGpu] = []
    for g in gpus:
        if g.problem:
            problems[g.problem] = problems.get(g.problem, 0) + 1
        elif g.action:
            actions[g.action] = actions.get(g.action, 0) + 1
        if g.mig and g.usable:
            mig.append(g)
    if size < m and not mig:
        return _block(node, "too_small", f"has {size} GPUs; the request needs {m} on one node")
    excluded = sum(problems.values()) + sum(actions.values())
    if excluded and offer.free + excluded >= m:
        parts = []
        if problems:
            named = sorted((GpuProblem(p).label, n) for p, n in problems.items())
            parts.append("unhealthy: " + ", ".join(f"{n} {label}" for label, n in named))
        if actions:
            named = sorted((a, n) for a, n in actions.items())
            parts.append("need action: " + ", ".join(f"{n} {label}" for label, n in named))
        reason = "unhealthy_gpu" if problems else "needs_action"
        return _block(node, reason, f"{offer.free} GPU(s) free; " + "; ".join(parts))
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


# Plans of one cluster ------------------------------------------------------------------


@dataclass
class ClusterPlan:
    """One cluster's answer to a shaped request: the nodes chosen, the spare, the blocked."""

    cluster: str
    kind: str
    shape: Shape
    chosen: list[Option]
    spare: list[Option]
    blocked: list[BlockedNode]
    reason: str | None
    locality: Locality | None = None
    """How close the nodes chosen are on the network, and why they were chosen."""
    mig_profile: str | None = None
    """The MIG profile planned: the request's, or for `1g` the cluster's profile chosen."""
    avoided: bool = False
    """It takes a node the planner avoids (`Planner.avoiding`): its `chosen` are the options
    of the nodes standing for them, each once per member taken (their count, GPUs, rank and
    models as the plan's), not the members, and it has no spare nor locality."""

    @property
    def models(self) -> list[str]:
        return chosen_models(self.chosen)

    @property
    def mixes_models(self) -> bool:
        """The nodes chosen hold several GPU models: the job runs at the slowest GPU's pace."""
        return len(self.models) > 1

    @property
    def fits(self) -> bool:
        return self.reason is None

    @property
    def total(self) -> int:
        return sum(o.m for o in self.chosen)

    def rank(self) -> PlanRank:
        worst = max((o.rank.link_rank for o in self.chosen), default=UNKNOWN_RANK)
        leftover = sum(o.free - o.m for o in self.chosen)
        return PlanRank(len(self.chosen), worst, leftover, self.cluster)


class Planner:
    """Places shaped requests on a loaded fleet; offers are cached per filter set.

    A node of the fleet may stand for its twins (`FleetNode.twins`): offers and options are
    worked out once for it, counted once per node, and the nodes an answer may list (the
    chosen, the candidates, with a fabric every node) are its members, by name.
    """

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self._offers: dict[Filters, list[Offer | BlockedNode]] = {}
        self._members: dict[int, list[FleetNode]] = {}
        self._options: dict[tuple[int, int, Filters], Option | BlockedNode] = {}
        self._stand_in = {n.id: n for n in fleet.nodes if n.twins}
        self.avoid: AbstractSet[int] = frozenset()

    def avoiding(self, avoid: AbstractSet[int]) -> Planner:
        """The planner (its offers and options shared) whose plans on more nodes than any
        leaf, spine group or NVLink domain holds say they take a node of `avoid` (node ids)
        without making the members of the options they rank (`ClusterPlan.avoided`): the
        alternatives reject such a plan, and 5,000 members a try are most of their cost."""
        planner = copy(self)
        planner.avoid = avoid
        return planner

    def members(self, node: FleetNode, limit: int | None) -> list[FleetNode]:
        """The node and its twins as nodes of their own, the first `limit` (None: all)."""
        if not node.twins:
            return [node]
        known = self._members.get(node.id)
        wanted = node.weight if limit is None else min(limit, node.weight)
        if known is None or len(known) < wanted:
            known = self._members[node.id] = node.members(wanted)
        return known[:wanted]

    def option(self, offer: Offer, m: int, filters: Filters) -> Option | BlockedNode:
        """`option_for`, once per node and its twins: a twin's is its stand-in's, renamed
        (a twin's GPU facts are its stand-in's until read, so it is never planned itself)."""
        node = offer.node
        stand_in = node if node.twin_of is None else self._stand_in[node.twin_of]
        key = (stand_in.id, m, filters)
        found = self._options.get(key)
        if found is None:
            own = offer if node is stand_in else replace(offer, node=stand_in)
            found = self._options[key] = option_for(own, m, self.fleet, filters)
        return found if node is stand_in else _as_member(found, node)

    def _option_members(self, options: list[Option], limit: int | None) -> list[Option]:
        """Each option for itself and the twins of its node (the first `limit` of each),
        best first: twins rank alike, so ties fall to the names as they did node by node.
        With a `limit`, only the options whose members can be among the first `limit`
        (`_leading`) are made members of. `options` come best first (`_option_key`)."""
        if limit is not None:
            options = _leading(options, limit)
        members: list[Option] = []
        for run in _runs(options):
            found = [
                option if node is option.node else _member_option(option, node)
                for option in run
                for node in self.members(option.node, limit)
            ]
            found.sort(key=_RANK)  # by name within a run: a pass where they come in order
            members += found
        return members

    def offers(self, filters: Filters) -> list[Offer | BlockedNode]:
        if filters not in self._offers:
            found = (node_offer(n, filters) for n in self.fleet.nodes)
            self._offers[filters] = [o for o in found if o is not None]
        return self._offers[filters]

    def clusters(self) -> dict[str, str]:
        return self.fleet.clusters()

    def plan(self, cluster: str, kind: str, shape: Shape, filters: Filters) -> ClusterPlan:
        offers = [o for o in self.offers(filters) if _cluster_of(o) == cluster]
        blocked = [o for o in offers if isinstance(o, BlockedNode)]
        live = [o for o in offers if isinstance(o, Offer)]
        if shape.spread:
            return self._spread(cluster, kind, shape, filters, live, blocked)
        m, count = shape.per_node or 0, shape.count or 1
        options: list[Option] = []
        for offer in live:
            result = self.option(offer, m, filters)
            if isinstance(result, BlockedNode):
                blocked.append(result)
            else:
                options.append(result)
        options.sort(key=_option_key)
        if sum(o.node.weight for o in options) >= count:
            # the chosen and the candidates are among the first of each kind of node; on a
            # fabric, any node may be the closest
            limit = None if self._may_be_close(count) else count + CANDIDATE_LIMIT
            if limit is not None and self.avoid:
                avoided = self._avoided(options, count, limit)
                if avoided is not None:
                    return ClusterPlan(
                        cluster, kind, shape, avoided, [], blocked, None, avoided=True
                    )
            ranked = self._option_members(options, limit)
            chosen, locality = self._near(ranked, count)
            taken = {id(o) for o in chosen}
            spare = [o for o in ranked if id(o) not in taken]
            return ClusterPlan(cluster, kind, shape, chosen, spare, blocked, None, locality)
        reason = self._fixed_reason(kind, shape, filters, options, live, blocked)
        return ClusterPlan(cluster, kind, shape, options, [], blocked, reason)

    def _avoided(self, options: list[Option], count: int, limit: int) -> list[Option] | None:
        """The first `count` members of the ranked `options` (as `_option_members` with
        `limit` ranks them) when one of them is avoided, else None, with no member made: each
        option stands for its members, repeated once per member taken (of a run cut short,
        the members first by name)."""
        avoid = self.avoid
        chosen: list[Option] = []
        hit = False
        left = count
        for run in _runs(_leading(options, limit)):
            size = sum(min(limit, o.node.weight) for o in run)
            if size <= left:
                for option in run:
                    node = option.node
                    hit = (
                        hit
                        or node.id in avoid
                        or not avoid.isdisjoint(twin[0] for twin in node.twins[: limit - 1])
                    )
                    chosen += [option] * min(limit, node.weight)
                left -= size
            else:  # its members by name (ranked alike but for it), as `_option_members`
                named = [(twin[1], twin[0], o) for o in run for twin in o.node.identities[:limit]]
                named.sort(key=_NAME)
                first = named[:left]
                hit = hit or not avoid.isdisjoint(node_id for _, node_id, _ in first)
                chosen += [o for _, _, o in first]
                left = 0
            if not left:
                break
        return chosen if hit else None

    def _may_be_close(self, count: int) -> bool:
        """Whether `count` nodes could share a leaf, a spine group or an NVLink domain: on a
        fabric, where one of them holds that many servers. Else the first as ranked are the
        answer, and no member beyond them is made (5,000 nodes of 25,000 are close nowhere)."""
        if count <= 1 or not self.fleet.places:
            return False
        return count <= self.fleet.largest_group()

    def place(self, node: FleetNode) -> Place:
        return self.fleet.places.get(node.server_id or 0, NOWHERE)

    def _near(self, options: list[Option], count: int) -> tuple[list[Option], Locality]:
        """`count` of the ranked options, close on the fabric (`locality.choose_local`); nodes
        with a critical finding join only when the others are too few."""
        if self._may_be_close(count):
            calm = [o for o in options if not _troubled(o.node)]
            if len(calm) >= count:
                return choose_local(calm, count, lambda o: self.place(o.node))
        chosen = options[:count]
        places = self.fleet.places  # `place`, inline: 5,000 nodes chosen are 5,000 calls
        return chosen, locality_of(
            [places.get(o.node.server_id or 0, NOWHERE) for o in chosen], count
        )

    def _capacity(self, offer: Offer, filters: Filters) -> int:
        """The most GPUs one node can give under the filters (NVLink or NUMA may cap it)."""
        if offer.free <= 1 or not (filters.nvlink_only or filters.same_numa):
            return offer.free
        for m in range(offer.free, 0, -1):
            if isinstance(self.option(offer, m, filters), Option):
                return m
        return 0

    def _spread(
        self,
        cluster: str,
        kind: str,
        shape: Shape,
        filters: Filters,
        live: list[Offer],
        blocked: list[BlockedNode],
    ) -> ClusterPlan:
        """Slurm `--gpus=N`: the fewest nodes, the fullest first, the tightest fit last."""
        sized: list[tuple[int, Offer]] = []
        for offer in live:
            capacity = self._capacity(offer, filters)
            if capacity:
                sized.append((capacity, offer))
            else:
                blocked.append(_shortfall(offer, 1, filters))
        free = sum(c * o.node.weight for c, o in sized)
        eligible = sum(o.node.weight for _, o in sized)
        # of one kind of node a spread takes at most as many as hold its GPUs, the tightest
        # fit and the candidates next; on a fabric, any node may be the closest
        sized = [
            (capacity, offer if node is offer.node else replace(offer, node=node))
            for capacity, offer in sized
            for node in self.members(
                offer.node,
                None if self.fleet.places else -(-shape.total // capacity) + CANDIDATE_LIMIT + 1,
            )
        ]
        full = {id(o): self.option(o, c, filters) for c, o in sized}
        sized.sort(key=lambda co: (_troubled(co[1].node), -co[0], _option_rank(full[id(co[1])])))
        chosen = self._spread_pick(sized, full, shape.total, filters)
        if chosen is None:
            within = " (NVLink-connected within each node)" if filters.nvlink_only else ""
            reason = (
                f"needs {shape.total} free GPUs{within}; {free} free on {eligible} eligible "
                "node(s)" + _blocked_summary(blocked)
            )
            options = [o for o in full.values() if isinstance(o, Option)]
            return ClusterPlan(cluster, kind, shape, [], options, blocked, reason)
        locality = locality_of([self.place(o.node) for o in chosen], len(chosen))
        if len(chosen) > 1 and self.fleet.places:
            chosen, locality = self._spread_near(sized, full, shape.total, filters, chosen)
        used = {o.node.id for o in chosen}
        spare = [o for o in full.values() if isinstance(o, Option) and o.node.id not in used]
        spare.sort(key=lambda o: (_troubled(o.node), -o.m, o.rank))
        chosen.sort(key=lambda o: (_troubled(o.node), -o.m, o.rank))
        return ClusterPlan(cluster, kind, shape, chosen, spare, blocked, None, locality)

    def _spread_pick(
        self,
        sized: list[tuple[int, Offer]],
        full: dict[int, Option | BlockedNode],
        total: int,
        filters: Filters,
    ) -> list[Option] | None:
        """The fewest of `sized` (fullest first) that hold `total`: whole nodes, then the
        tightest fit for the rest; None when they cannot."""
        prefix = count = 0
        for capacity, _offer in sized:
            prefix += capacity
            count += 1
            if prefix >= total:
                break
        if prefix < total or not sized:
            return None
        remaining, chosen = total, []
        for capacity, offer in sized[: count - 1]:
            option = full[id(offer)]
            assert isinstance(option, Option)
            chosen.append(option)
            remaining -= capacity
        tail: list[Option] = []
        for capacity, offer in sized[count - 1 :]:
            if capacity >= remaining:
                option = self.option(offer, remaining, filters)
                if isinstance(option, Option):
                    tail.append(option)
        tail.sort(key=_option_key)
        chosen.append(tail[0])
        return chosen

    def _spread_near(
        self,
        sized: list[tuple[int, Offer]],
        full: dict[int, Option | BlockedNode],
        total: int,
        filters: Filters,
        default: list[Option],
    ) -> tuple[list[Option], Locality]:
        """A spread on as few nodes as `default`, under one leaf, else one spine group, else
        one NVLink domain, where one holds it (the best ranked of each group win ties)."""
        position = {offer.node.id: i for i, (_, offer) in enumerate(sized)}
        calm = [(c, o) for c, o in sized if not _troubled(o.node)]
        for attribute, words, hops in LEVELS:
            groups: dict[str, list[tuple[int, Offer]]] = {}
            for capacity, offer in calm:
                key = getattr(self.place(offer.node), attribute)
                if key is not None:
                    groups.setdefault(key, []).append((capacity, offer))
            fits = []
            for group in groups.values():
                picked = self._spread_pick(group, full, total, filters)
                if picked is not None and len(picked) <= len(default):
                    spent = sum(position[o.node.id] for o in picked)
                    fits.append((len(picked), spent, picked))
            if fits:
                _, _, best = min(fits, key=lambda fit: (fit[0], fit[1]))
                why = f"all {len(best)} nodes {words}" + (f": {between(hops)}" if hops else "")
                if attribute != "leaf":
                    why = f"no leaf holds the job on {len(default)} nodes; " + why
                return best, describe([self.place(o.node) for o in best], why)
        return default, locality_of([self.place(o.node) for o in default], len(default))

    def _fixed_reason(
        self,
        kind: str,
        shape: Shape,
        filters: Filters,
        options: list[Option],
        live: list[Offer],
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
        best = max(live, key=lambda o: (o.free, _last_name(o.node)), default=None)
        most = f"; the most on one node is {best.free} ({_last_name(best.node)})" if best else ""
        if count == 1 and kind == ClusterKind.KUBERNETES:
            head = f"a Kubernetes pod runs on one node: no node has {m} {unit}{qualifier}"
        elif count == 1:
            head = f"no node has {m} {unit}{qualifier}"
        else:
            have = sum(o.node.weight for o in options)
            head = f"needs {count} nodes with {m} {unit} each{qualifier}; {have} have"
        return head + most + _blocked_summary(blocked)


def _last_name(node: FleetNode) -> str:
    """The last name of the node and its twins (they come by name after it)."""
    return node.twins[-1][1] if node.twins else node.name


def _as_member(found: Option | BlockedNode, node: FleetNode) -> Option | BlockedNode:
    """What its stand-in can give, as the twin `node`'s own."""
    if isinstance(found, BlockedNode):
        return _block(node, found.reason, found.detail)
    return _member_option(found, node)


def _member_option(option: Option, node: FleetNode) -> Option:
    """The option as the twin `node`'s: built directly, not by `replace` and `_replace` (a
    multi-node question on a fabric makes one per node; 4x faster). `node` is `Ranking`'s
    last field."""
    rank = tuple.__new__(Ranking, (*option.rank[:-1], node.name))
    return Option(node, option.m, option.gpu_set, option.free, rank)


def _leading(options: list[Option], limit: int) -> list[Option]:
    """The options (nodes standing for their twins, best first: sorted by `_option_key`)
    whose members can be among the first `limit` of all members ranked: by their rank but the
    name, until they stand for `limit` nodes, and those ranked alike with the last (their
    members interleave by name)."""
    kept: list[Option] = []
    nodes = 0
    last: tuple | None = None
    for option in options:
        key = (_troubled(option.node), option.rank[:-1])
        if last is not None and key != last:
            break
        kept.append(option)
        nodes += option.node.weight
        if last is None and nodes >= limit:
            last = key
    return kept


_NAME = itemgetter(0)
_RANK = attrgetter("rank")
"""The sort key of the options of one run (`_runs`): `_option_key` less what the run shares,
at C speed (a question on 5,000 nodes sorts their members)."""


def _runs(options: list[Option]) -> list[list[Option]]:
    """The options (sorted by `_option_key`) in runs ranked alike but for the name: the
    members of one run interleave by name, those of two runs never (the runs come in order),
    so sorting each run alone orders all (one node's members mostly come by name already:
    itself first, then its twins, `group_nodes`)."""
    runs: list[list[Option]] = []
    last: tuple | None = None
    for option in options:
        key = (_troubled(option.node), option.rank[:-1])
        if key != last:
            runs.append([])
            last = key
        runs[-1].append(option)
    return runs


def _troubled(node: FleetNode) -> bool:
    """A node with an open critical finding (on it or its server) goes last, whatever its
    rank: a job placed there may be lost."""
    return node.critical_findings > 0


def _option_key(option: Option) -> tuple[bool, Ranking]:
    return _troubled(option.node), option.rank


def _option_rank(option: Option | BlockedNode) -> Ranking:
    return option.rank if isinstance(option, Option) else BLOCKED_RANK


def _cluster_of(offer: Offer | BlockedNode) -> str:
    return offer.cluster if isinstance(offer, BlockedNode) else offer.node.cluster


def blocked_counts(blocked: Iterable[BlockedNode]) -> Counter[str]:
    """Nodes excluded by reason, twins counted ("model" nodes are out of scope, not
    excluded)."""
    counts: Counter[str] = Counter()
    for b in blocked:
        if b.reason != "model":
            counts[b.reason] += b.weight
    return counts


def excluded_nodes(blocked: Iterable[BlockedNode]) -> set[int]:
    """The ids of the nodes blocked for their state or their GPUs' health (`EXCLUDING`),
    twins included."""
    return {
        node_id
        for b in blocked
        if b.reason in EXCLUDING
        for node_id in (b.node_id, *(twin[0] for twin in b.twins))
    }


def _blocked_summary(blocked: Iterable[BlockedNode]) -> str:
    counts = blocked_counts(blocked)
    if not counts:
        return ""
    parts = [f"{counts[r]} {BLOCK_TEXT[r]}" for r in BLOCK_ORDER if counts.get(r)]
    return "; nodes excluded: " + ", ".join(parts)


def node_models(node: FleetNode) -> list[str]:
    """The GPU models of a node: its agent's GPU names, else its scheduler's product labels."""
    names = {g.name for g in node.gpus if g.name} if node.gpus else set(node.products)
    return sorted(names)


def chosen_models(options: Iterable[Option]) -> list[str]:
    """The GPU models of the options' nodes. Twins share their stand-in's GPU list (and
    product list), so each list is looked at once: thousands of nodes chosen on a fabric are
    a few lists."""
    # one node per list (the lists outlive the dict: the options hold them)
    distinct = {id(o.node.gpus or o.node.products): o.node for o in options}
    return sorted({name for node in distinct.values() for name in node_models(node)})


def plan_one_model(
    planner: Planner, cluster: str, kind: str, shape: Shape, filters: Filters, *, mix: bool
) -> ClusterPlan:
    """The plan that keeps one GPU model per job (a mixed job runs at the slowest GPU's pace):
    the best plan of a single model, or none that fits, saying that mixing would. A plan that
    mixes models (`mixes_models`) fits only when the request allows mixing (`mix`)."""
    plan = planner.plan(cluster, kind, shape, filters)
    if mix or not plan.fits or not plan.mixes_models:
        return plan
    offered = [o for o in planner.offers(filters) if isinstance(o, Offer)]
    models = sorted({m for o in offered if o.node.cluster == cluster for m in node_models(o.node)})
    single = [
        p
        for p in (planner.plan(cluster, kind, shape, replace(filters, model=m)) for m in models)
        if p.fits and len(p.models) == 1
    ]
    if single:
        best = min(single, key=lambda p: p.rank())
        best.blocked = plan.blocked  # what blocks it, not the other models' nodes
        return best
    free: Counter[str] = Counter()
    for offer in offered:
        names = node_models(offer.node)
        if offer.node.cluster == cluster and len(names) == 1:
            free[names[0]] += offer.free * offer.node.weight
    counts = ", ".join(f"{n} {m}" for m, n in sorted(free.items(), key=lambda mn: (-mn[1], mn[0])))
    unit = f"MIG {filters.mig_profile} devices" if filters.mig_profile else "GPUs"
    reason = (
        f"no one GPU model holds {shape.describe(kind, filters.mig_profile)}"
        + (f" (free {unit}: {counts})" if counts else "")
        + f"; it fits only by mixing GPU models ({', '.join(plan.models)}), and a mixed job "
        "runs at the slowest GPU's pace: allow mixing GPU models (mix_models) to place it"
        + _blocked_summary(plan.blocked)
    )
    return ClusterPlan(
        cluster, kind, shape, [], plan.chosen + plan.spare, plan.blocked, reason, None
    )


def fleet_mig_profiles(fleet: Fleet, asked: str, cluster: str | None = None) -> list[str]:
    """The MIG profiles of the fleet (of one cluster) that answer `asked` (every one for ""):
    what its schedulers offer and its agents report, by name."""
    found = {
        profile
        for node in fleet.nodes
        if cluster is None or node.cluster == cluster
        for profile in [
            *(p for p, n in node.mig_allocatable.items() if n),
            *(d.profile for d in node.migs),
        ]
        if not asked or mig_profile_matches(asked, profile)
    }
    return sorted(found)


def plan_cluster(
    planner: Planner, cluster: str, kind: str, request: PlacementRequest
) -> ClusterPlan:
    """The request planned in one cluster: one GPU model per job unless it allows mixing, and
    for a MIG request by slices (`1g`) the best of the cluster's profiles that answer it (a
    job asks one profile: a pod's `nvidia.com/mig-1g.10gb`), else the one most free."""
    shape = request_shape(request, kind)
    filters = Filters.of(request)
    asked = request.mig_profile
    if not asked or not mig_profile_is_prefix(asked):
        plan = plan_one_model(planner, cluster, kind, shape, filters, mix=request.mix_models)
        plan.mig_profile = asked
        return plan
    profiles = fleet_mig_profiles(planner.fleet, asked, cluster)
    if not profiles:
        plan = plan_one_model(planner, cluster, kind, shape, filters, mix=request.mix_models)
        plan.reason = f"no MIG {asked} profile offered in {cluster}" + _blocked_summary(
            plan.blocked
        )
        plan.chosen, plan.spare, plan.mig_profile = [], [], asked
        return plan
    plans = []
    for profile in profiles:
        plan = plan_one_model(
            planner,
            cluster,
            kind,
            shape,
            replace(filters, mig_profile=profile),
            mix=request.mix_models,
        )
        plan.mig_profile = profile
        plans.append(plan)
    fitting = [p for p in plans if p.fits]
    if fitting:
        return min(fitting, key=lambda p: p.rank())

    def free(plan: ClusterPlan) -> int:
        offers = planner.offers(replace(filters, mig_profile=plan.mig_profile))
        return sum(
            o.free * o.node.weight
            for o in offers
            if isinstance(o, Offer) and o.node.cluster == cluster
        )

    return max(plans, key=lambda p: (free(p), p.mig_profile or ""))


def plan_request(planner: Planner, request: PlacementRequest) -> list[ClusterPlan]:
    """The request planned in every cluster it names (all, without a name), by name.

    Raises PlacementRequestError for a request its clusters' schedulers cannot read.
    """
    return [
        plan_cluster(planner, name, kind, request)
        for name, kind in sorted(planner.clusters().items())
        if not request.cluster or name == request.cluster
    ]


# The answer's rows ----------------------------------------------------------------------


def node_choice(option: Option, fleet: Fleet, filters: Filters) -> NodeChoice:
    """The answer's row for one node; the GPU set is chosen again with NIC affinity known."""
    node = option.node
    gpu_set = option.gpu_set
    if gpu_set is not None and not filters.mig_profile and node.server_id is not None:
        offer = node_offer(node, filters)
        if isinstance(offer, Offer):
            again = option_for(offer, option.m, fleet, filters)
            if isinstance(again, Option) and again.gpu_set is not None:
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
                    gpu_id=parent.id,
                )
            )
    elif gpu_set is not None:
        gpus = [
            GpuChoice(g.index, uuids.get(g.id, ""), g.numa_node, gpu_id=g.id) for g in gpu_set.gpus
        ]
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
        in_use_known=not option.rank.in_use_unknown,
        critical_findings=node.critical_findings,
        gpus_needing_action=node.gpus_needing_action,
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
        if isinstance(offer, Offer):
            free[node.id] = offer.free
    return free


def nodes_needing_action(nodes: Iterable[FleetNode]) -> list[NeedingAction]:
    """The nodes whose servers have GPUs needing action (placement skips those GPUs): how many
    each and why, the most first. Twins need the same action on the same GPUs."""
    rows = []
    for node in nodes:
        count = node.gpus_needing_action
        if not count:
            continue
        types = Counter(g.action for g in node.gpus if g.action and g.problem != "lost")
        reasons = [f"{n} {t}" for t, n in sorted(types.items())]
        for node_id, name, server_id, hostname in node.identities:
            rows.append(
                NeedingAction(
                    node=name,
                    node_id=node_id,
                    cluster=node.cluster,
                    server=server_id,
                    server_hostname=hostname,
                    gpus=count,
                    reasons=reasons,
                )
            )
    rows.sort(key=lambda r: (-r.gpus, r.cluster, r.node))
    return rows


def needing_action_words(rows: list[NeedingAction]) -> str | None:
    """The answer's sentence about GPUs skipped for health, None when none was."""
    if not rows:
        return None
    gpus = sum(r.gpus for r in rows)
    return (
        f"{gpus} GPU(s) on {len(rows)} node(s) skipped: they need action (drain, reset or RMA): "
        "failing NVML, an open health finding, or a critical finding on their server"
    )
