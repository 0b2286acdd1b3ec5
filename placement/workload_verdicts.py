"""Was each running workload placed as well as the fleet allowed? The verdict of every running
multi-GPU workload, written to its `locality` and `verdict` (DESIGN.md, "Workloads").

- `good`: it sits as close as its shape allows (one node, or all its nodes under one leaf) and
  the fleet had no better-wired set for it.
- `spread`: wider than one leaf, but the fleet as of its start could not have held it closer.
- `poorly_placed`: the placement answer for its shape (its nodes × GPUs per node, its model)
  on the fleet as of its start gives fewer switch hops, or as many with a better link within
  a node: that set is named (`better`, `why`).
- `unknown`: without the facts (no GPU indices, links or fabric known).

The fleet as of its start: every node's GPUs free but those other workloads' allocations held
at that moment (`since <= started_at < until`, or `until` null); the nodes' states are today's
(a scheduler keeps no history of them). The locality itself is `workloads.locality` (pure).

Cost: one read of the fleet per pass (`selectors.fleet_load` every node its own, the fabric's
places, the allocations), never per workload. The fleet as of each start is swept once a
pass in time order (`FleetThen`: only the nodes an allocation started or ended on between two
starts are built again, a workload's own GPUs subtracted on its own nodes), the planner sees
only the nodes with its share free, and what a node offers is worked out once a pass per
state of it (`_PassMemo`): a verdict is in memory and costs the nodes it could use. A
workload whose allocations and start are unchanged since its last judgement (`judged_digest`)
is skipped, and at most `JUDGE_LIMIT` are judged per pass (the rest next pass, oldest first).
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from inventory.choices import link_rank
from workloads.choices import Verdict
from workloads.locality import HeldNode, Spread, link_words, locality_record, workload_spread
from workloads.services.locality import workload_locality_write

from .facts import Fleet, FleetNode, node_copy
from .gpu_sets import NO_PAIRS_RANK
from .locality import NOWHERE, Place
from .planner import ClusterPlan, Offer, Option, Planner, node_offer, option_for, plan_request
from .selectors import (
    AllocationRow,
    WorkloadRow,
    fleet_load,
    fleet_places,
    gpus_with_pix_nic,
    running_workloads,
    server_networks,
    workload_allocations,
)
from .types import BlockedNode, Filters, PlacementRequest, PlacementRequestError

JUDGE_LIMIT = 200
"""Workloads judged per pass at most: a backfill of 50,000 spreads over passes."""
JUDGING_VERSION = "1"
"""Part of every digest: a change to the rules judges every workload again."""


@dataclass(frozen=True, slots=True)
class Best:
    """The placement answer for a workload's shape on the fleet as of its start."""

    nodes: tuple[str, ...]
    hops: int | None
    link_rank: int
    why: str


def allocation_digest(started_at: Any, allocations: Iterable[AllocationRow]) -> str:
    """What a judgement depends on of the workload itself: its start and the GPUs it holds."""
    held = sorted(
        (a.node_name, a.gpu_index if a.gpu_index is not None else -1, a.gpu_id or 0)
        for a in allocations
    )
    text = f"{JUDGING_VERSION}|{started_at.isoformat() if started_at else ''}|{held}"
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def verdict_of(spread: Spread, best: Best | None) -> tuple[str, str, list[str]]:
    """(verdict, why in words, the better node set) of a workload's spread against the best
    the fleet had for its shape at its start (None: not known, or nothing fitted then)."""
    multi = spread.nodes > 1
    if multi and spread.switch_hops is None:
        return Verdict.UNKNOWN, "the fabric of its nodes is not known", []
    if spread.gpus > spread.nodes and spread.within_node is None and not spread.within_known:
        return Verdict.UNKNOWN, "the links between its GPUs are not known", []
    actual_rank = link_rank(spread.within_node) if spread.within_node else NO_PAIRS_RANK
    if best is not None and best.hops is not None:
        closer = best.hops < (spread.switch_hops or 0)
        wired = best.hops == spread.switch_hops and best.link_rank < actual_rank
        if closer or wired:
            names = list(best.nodes)
            return (
                Verdict.POORLY_PLACED,
                f"at its start {', '.join(names)} were free: {best.why}",
                names,
            )
    if (spread.switch_hops or 0) <= 1:
        return Verdict.GOOD, "", []
    return Verdict.SPREAD, "the fleet had no closer set free at its start", []


def _as_of(node: FleetNode, busy: Counter[int], counted: int) -> FleetNode:
    """The node with the GPUs `busy` (index -> allocations holding it) and `counted` (held,
    index unknown) in use, nothing used by another scheduler."""
    indexes = {i for i, n in busy.items() if n > 0}
    return node_copy(
        node,
        busy_indexes=None if counted else indexes,
        whole_used=len(indexes) + counted,
        shared_busy=set(),
        shared_used=0,
    )


class FleetThen:
    """The nodes as of moments asked in time order, for a pass's workloads at once.

    The allocations' starts and ends are swept once over the pass (`since <= moment < until`,
    `until` null: still held); between two moments only the nodes an allocation started or
    ended on are built again, the others are the same `FleetNode` as before (so a planner
    memo keyed by the node, `_PassMemo`, works each out once a pass). A workload's own
    allocations are taken out by subtraction on its own nodes alone. Pure: no queries.
    """

    def __init__(self, nodes: Sequence[FleetNode], history: Sequence[AllocationRow]) -> None:
        self._base = {n.id: n for n in nodes}
        self._order: dict[str, list[int]] = defaultdict(list)
        for n in nodes:
            self._order[n.cluster].append(n.id)
        # an allocation that ends before (or as) it starts is held at no moment
        held = [
            a for a in history if a.node_id is not None and (a.until is None or a.until > a.since)
        ]
        self._starts = sorted(held, key=lambda a: a.since)
        self._ends = sorted((a for a in held if a.until is not None), key=lambda a: a.until)
        self._next_start = self._next_end = 0
        self._busy: dict[int, Counter[int]] = defaultdict(Counter)
        self._counted: dict[int, int] = defaultdict(int)
        self._now: dict[int, FleetNode] = {n.id: _as_of(n, Counter(), 0) for n in nodes}
        self._moment: Any = None

    def _count(self, a: AllocationRow, step: int) -> None:
        assert a.node_id is not None
        if a.gpu_index is None:
            self._counted[a.node_id] += step
        else:
            self._busy[a.node_id][a.gpu_index] += step

    def _advance(self, moment: Any) -> None:
        if self._moment is not None and moment < self._moment:
            raise ValueError("FleetThen is asked its moments in time order")
        self._moment = moment
        touched: set[int] = set()
        starts, ends = self._starts, self._ends
        while self._next_start < len(starts) and starts[self._next_start].since <= moment:
            a = starts[self._next_start]
            self._count(a, 1)
            touched.add(a.node_id)  # type: ignore[arg-type]
            self._next_start += 1
        while self._next_end < len(ends) and ends[self._next_end].until <= moment:
            a = ends[self._next_end]
            self._count(a, -1)
            touched.add(a.node_id)  # type: ignore[arg-type]
            self._next_end += 1
        for node_id in touched:
            base = self._base.get(node_id)
            if base is not None:
                self._now[node_id] = _as_of(
                    base, self._busy[node_id], self._counted.get(node_id, 0)
                )

    def at(self, moment: Any, *, cluster: str, own: Sequence[AllocationRow]) -> list[FleetNode]:
        """The nodes of `cluster` as of `moment`, without the GPUs that `own` (one workload's
        allocations, open and closed) held then."""
        self._advance(moment)
        mine: dict[int, list[AllocationRow]] = defaultdict(list)
        for a in own:
            if a.node_id is None or a.node_id not in self._base or a.since > moment:
                continue
            if a.until is not None and a.until <= moment:
                continue
            mine[a.node_id].append(a)
        apart: dict[int, FleetNode] = {}
        for node_id, rows in mine.items():
            busy = Counter(self._busy[node_id])
            counted = self._counted.get(node_id, 0)
            for a in rows:
                if a.gpu_index is None:
                    counted -= 1
                else:
                    busy[a.gpu_index] -= 1
            apart[node_id] = _as_of(self._base[node_id], busy, counted)
        now = self._now
        return [apart[i] if i in apart else now[i] for i in self._order.get(cluster, [])]


class _PassMemo:
    """What a node offers a request and the option it gives, once per `FleetNode` a pass:
    the fleets as of the workloads' starts share most of their nodes (`FleetThen`). Keyed by
    the filters, then by the node (or offer) itself, which the memo holds alive."""

    def __init__(self) -> None:
        self._offers: dict[Filters, dict[int, tuple[FleetNode, Offer | BlockedNode | None]]] = {}
        self._options: dict[tuple[int, Filters], dict[int, tuple[Offer, Option | BlockedNode]]] = {}

    def offers(self, nodes: Iterable[FleetNode], filters: Filters) -> list[Offer | BlockedNode]:
        known = self._offers.setdefault(filters, {})
        found = []
        for node in nodes:
            seen = known.get(id(node))
            if seen is None:
                seen = known[id(node)] = (node, node_offer(node, filters))
            if seen[1] is not None:
                found.append(seen[1])
        return found

    def option(self, offer: Offer, m: int, filters: Filters, fleet: Fleet) -> Option | BlockedNode:
        """`option_for` once per offer (the memo's own, from `offers`) for m GPUs under the
        filters; `fleet` gives the GPU sets, the same for every fleet of the pass."""
        known = self._options.setdefault((m, filters), {})
        found = known.get(id(offer))
        if found is None:
            found = known[id(offer)] = (offer, option_for(offer, m, fleet, filters))
        return found[1]


class _PlannerThen(Planner):
    """The planner on the fleet as of one start, its offers and options from the pass's memo
    (the same answers `Planner` works out, node by node: the pass's fleet has no twins)."""

    def __init__(self, fleet: Fleet, memo: _PassMemo) -> None:
        super().__init__(fleet)
        self._memo = memo

    def offers(self, filters: Filters) -> list[Offer | BlockedNode]:
        if filters not in self._offers:
            self._offers[filters] = self._memo.offers(self.fleet.nodes, filters)
        return self._offers[filters]

    def option(self, offer: Offer, m: int, filters: Filters) -> Option | BlockedNode:
        return self._memo.option(offer, m, filters, self.fleet)


def best_for(
    fleet: Fleet,
    nodes: list[FleetNode],
    cluster: str,
    per_node: list[int],
    models: Sequence[str],
    memo: _PassMemo | None = None,
) -> Best | None:
    """The placement answer for the shape (its nodes × GPUs per node, its one model) on
    `nodes` (the fleet as of a start); None when it is uneven or nothing fits. With `memo`,
    the nodes' offers and options of earlier answers in the pass are reused."""
    if not per_node or len(set(per_node)) != 1:
        return None
    request = PlacementRequest(
        cluster=cluster,
        nodes=len(per_node),
        gpus_per_node=per_node[0],
        model=models[0] if len(models) == 1 else None,
        mix_models=len(models) > 1,
    )
    # a node with fewer GPUs free than its share is blocked (`option_for`), and a blocked
    # node is in no answer's chosen set nor its fit: those are left out before planning
    able = [n for n in nodes if n.whole_free >= per_node[0]]
    then = Fleet(
        nodes=able,
        classes=fleet.classes,
        pairs=fleet.pairs,
        places=fleet.places,
        _sets=fleet._sets,
        _largest=fleet._largest,
    )
    try:
        planner = Planner(then) if memo is None else _PlannerThen(then, memo)
        plans: list[ClusterPlan] = plan_request(planner, request)
    except PlacementRequestError:
        return None
    plan = next((p for p in plans if p.fits), None)
    if plan is None:
        return None
    chosen = plan.chosen
    worst = max((o.rank.link_rank for o in chosen), default=NO_PAIRS_RANK)
    if len(chosen) == 1:
        option = chosen[0]
        link = option.gpu_set.link_class if option.gpu_set else None
        gpus = ", ".join(str(g.index) for g in option.gpu_set.gpus) if option.gpu_set else ""
        which = f"GPUs {gpus}" if gpus else f"{option.m} GPUs"
        words = f"{option.node.name} had {which} free {link_words(link) or 'together'}"
        return Best((option.node.name,), 0, worst, words)
    locality = plan.locality
    return Best(
        tuple(o.node.name for o in chosen),
        locality.hops if locality else None,
        worst,
        locality.why if locality else "",
    )


def held_nodes(
    allocations: Sequence[AllocationRow],
    fleet: Fleet,
    pix: dict[int, set[int]],
    gbps: dict[int, float],
    rails: dict[int, set[int]],
) -> list[HeldNode]:
    """A workload's allocations as plain facts per node, for `workloads.locality`."""
    by_node: dict[str, list[AllocationRow]] = defaultdict(list)
    for a in allocations:
        by_node[a.node_name].append(a)
    found = []
    for name, rows in sorted(by_node.items()):
        server = next((a.server_id for a in rows if a.server_id is not None), None)
        ids = {a.gpu_index: a.gpu_id for a in rows if a.gpu_index is not None}

        def pair(a: int, b: int, server: int | None = server, ids: dict = ids) -> str | None:
            if server is None or ids.get(a) is None or ids.get(b) is None:
                return None
            return fleet.pair_class(server, ids[a], ids[b])

        nic = pix.get(server) if server is not None else None
        place: Place = fleet.places.get(server, NOWHERE) if server is not None else NOWHERE
        found.append(
            HeldNode(
                name=name,
                gpus=tuple(sorted(i for i in ids)),
                pair_class=pair,
                nic_at_pix=None
                if nic is None
                else frozenset(i for i, g in ids.items() if g in nic),
                place=place,
                nic_gbps=gbps.get(server) if server is not None else None,
                rails=frozenset(rails.get(server, ())) if server is not None else frozenset(),
                models=tuple(sorted({a.model for a in rows if a.model})),
            )
        )
    return found


def _as_wired_as_can_be(spread: Spread, servers: set[int | None], fleet: Fleet) -> bool:
    """Under one leaf (or on one node) on servers whose GPU pairs are all of one known class:
    no placement of its shape has fewer hops or a better link (most workloads, judged without
    planning them again)."""
    if (spread.switch_hops is None and spread.nodes > 1) or (spread.switch_hops or 0) > 1:
        return False
    if None in servers:
        return False
    for server in servers:
        uniform, link = fleet.uniform_class(server)
        if not uniform or link is None:
            return False
    return True


def _record(spread: Spread, per_node: list[int], best: Best | None, digest: str) -> dict[str, Any]:
    verdict, because, better = verdict_of(spread, best)
    return locality_record(
        spread, per_node, verdict=verdict, because=because, better=better, digest=digest
    )


@dataclass(frozen=True, slots=True)
class JudgeResult:
    running: int
    judged: int
    skipped: int


def judge_workloads(*, limit: int = JUDGE_LIMIT, force: bool = False) -> JudgeResult:
    """Judge the running multi-GPU workloads whose GPUs or start changed since their last
    judgement (all with `force`), and write their locality and verdict. Two queries when none
    changed; else a fixed number more, whatever the fleet (`selectors`)."""
    workloads = running_workloads()
    current: dict[int, list[AllocationRow]] = defaultdict(list)
    for a in workload_allocations():
        if a.until is None:
            current[a.workload_id].append(a)
    due: list[tuple[WorkloadRow, list[AllocationRow], str]] = []
    for w in workloads:
        held = current.get(w.id, [])
        digest = allocation_digest(w.started_at, held)
        if force or digest != w.judged_digest:
            due.append((w, held, digest))
    skipped = len(workloads) - len(due)
    due = due[:limit]
    if not due:
        return JudgeResult(len(workloads), 0, skipped)
    starts = [w.started_at for w, _, _ in due if w.started_at is not None]
    history = workload_allocations(since_before=min(starts)) if starts else []
    places = fleet_places()
    fleet = fleet_load(with_held=False, twins=False)
    fleet.places = places
    servers = {a.server_id for _, held, _ in due for a in held if a.server_id is not None}
    pix = gpus_with_pix_nic(servers)
    gbps, rails = server_networks(servers)
    # the fleet as of each start, swept once in time order; each workload's verdict from it
    then = FleetThen(fleet.nodes, history)
    memo = _PassMemo()
    own: dict[int, list[AllocationRow]] = defaultdict(list)
    for a in history:
        own[a.workload_id].append(a)
    records: dict[int, dict[str, Any]] = {}
    planned: list[tuple[WorkloadRow, Spread, list[int], str]] = []
    for w, held, digest in due:
        nodes = held_nodes(held, fleet, pix, gbps, rails)
        spread = workload_spread(nodes)
        if not nodes or any(not n.gpus for n in nodes):
            records[w.id] = locality_record(
                spread,
                [len(n.gpus) for n in nodes],
                verdict=Verdict.UNKNOWN,
                because="the GPUs it holds are not known by index",
                digest=digest,
            )
            continue
        per_node = [len(n.gpus) for n in nodes]
        if w.started_at is None or _as_wired_as_can_be(spread, {a.server_id for a in held}, fleet):
            # no fleet as of its start, or no set of its shape does better: no planning
            records[w.id] = _record(spread, per_node, None, digest)
        else:
            planned.append((w, spread, per_node, digest))
    planned.sort(key=lambda item: item[0].started_at)
    for w, spread, per_node, digest in planned:
        nodes_then = then.at(w.started_at, cluster=w.cluster, own=own.get(w.id, ()))
        models = spread.models or tuple(w.gpu_models)
        best = best_for(fleet, nodes_then, w.cluster, per_node, models, memo)
        records[w.id] = _record(spread, per_node, best, digest)
    rows = [(w.id, records[w.id]) for w, _, _ in due]
    workload_locality_write(rows=rows)
    return JudgeResult(len(workloads), len(rows), skipped)
