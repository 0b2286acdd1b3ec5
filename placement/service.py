"""Where a job fits now, and why: the thin service that reads the fleet, plans, and answers.

A request states what a scheduler would be asked. Kubernetes: one pod asking
`nvidia.com/gpu: N` (or `nvidia.com/mig-<profile>: N`) runs on one node; `nodes=K` with
`gpus_per_node=M` is K such pods on K nodes. Slurm: `--nodes=K --gpus-per-node=M`, or
`--gpus=N` spread over as few nodes as possible (16 GPUs on 8-GPU nodes is 2 x 8, never
16 x 1). With no cluster named, every cluster is tried with its own semantics.

Scale: `selectors` reads the fleet in a fixed number of queries and the planner computes in
memory, so a query costs the same number of round trips at 20 nodes and at 25,000.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, NamedTuple, ParamSpec, TypeVar

from clusters.choices import ClusterKind
from clusters.selectors import cluster_kind
from health.selectors import needing_action_share
from workloads.describe import workload_label

from .alternatives import (
    counts_decide,
    may_fit_elsewhere,
    mig_elsewhere,
    placement_alternatives,
)
from .capacity import capacity_compare
from .facts import Fleet, HeldOnNode, fleet_merge
from .fragmentation import ClusterFragmentation, NodeFree, fragmentation
from .locality import Locality, Place
from .planner import (
    BLOCK_ORDER,
    BLOCKED_LIMIT,
    CANDIDATE_LIMIT,
    ClusterPlan,
    Offer,
    Option,
    Planner,
    blocked_counts,
    excluded_nodes,
    fleet_mig_profiles,
    needing_action_words,
    node_choice,
    node_free_gpus,
    node_offer,
    nodes_needing_action,
    option_for,
    plan_request,
)
from .selectors import (
    Criticals,
    answer_details,
    critical_counts,
    fleet_counts,
    fleet_load,
    fleet_places,
    free_elsewhere,
    gpu_actions,
    held_gpus,
    held_workloads,
    twins_load,
    workload_labels,
)
from .types import (
    Alternative,
    BlockedNode,
    ClusterAnswer,
    Filters,
    MigElsewhere,
    PlacementRequest,
    PlacementRequestError,
    PlacementResult,
    mig_profile_text,
    request_shape,
)

P = ParamSpec("P")
R = TypeVar("R")


def gc_paused(fn: Callable[P, R]) -> Callable[P, R]:
    """Run `fn` with the cyclic garbage collector off: 200,000 GPU objects that live for one
    query would otherwise trigger full collections that scan them again and again (the time
    grew faster than the fleet). Reference counting still frees them when the query ends."""

    @functools.wraps(fn)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return paused


@gc_paused
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
    mix_models: bool = False,
    scheduler: str | None = None,
) -> PlacementResult:
    """Where the request fits now, best first; why not, what would fit instead, what blocks.

    Reads the fleet in a fixed number of queries (`selectors`), places in memory (`planner`,
    `alternatives`), and reads the GPU UUIDs and NICs of the nodes in the answer. Raises
    PlacementRequestError for a request that is not well formed.

    `scheduler` (a `ClusterKind`) keeps the request to that scheduler's clusters: a pod request
    over every cluster considers Kubernetes only, and the answer's `scope` says so.
    """
    if scheduler and scheduler not in ClusterKind.values:
        raise PlacementRequestError("scheduler", "kubernetes or slurm")
    profile = mig_profile_text(mig_profile) if mig_profile else None
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
        mix_models=mix_models,
        scheduler=scheduler or None,
    )
    for kind in [request.scheduler] if request.scheduler else ClusterKind.values:
        request_shape(request, kind)  # validate before touching the database
    places = fleet_places() if _may_span_nodes(request) else None  # multi-node: the fabric
    # the fleet's own, read once: every read of this answer shares them
    shared = FleetReads(held_gpus(), gpu_actions(), critical_counts())
    fleet = fleet_load(cluster=request.cluster, with_mig=bool(profile), **shared._asdict())
    fleet.places = places or {}
    _check_scheduler(request, fleet.clusters())
    planner = Planner(fleet.of_kind(request.scheduler))
    plans = plan_request(planner, request)
    fitting = sorted((p for p in plans if p.fits), key=lambda p: p.rank())
    best = fitting[0] if fitting else None
    blocked = [b for p in plans for b in p.blocked]
    filters = replace(Filters.of(request), mig_profile=best.mig_profile if best else profile)
    alternatives: list[Alternative] = []
    elsewhere: list[MigElsewhere] = []
    if best:
        reason = None
        chosen = best.chosen
        spare = _candidates(best, [p for p in fitting[1:] if p.mig_profile == best.mig_profile])
    else:
        chosen, spare = [], []
        # the alternatives are planned as asking them would plan them: in every cluster (other
        # clusters are alternatives too), and a multi-node one on the fabric
        excluded = excluded_nodes(blocked)
        whole = _alternatives_fleet(request, fleet, places, shared)
        alternatives = placement_alternatives(
            Planner(whole.of_kind(request.scheduler)), request, excluded
        )
        if places is None and any(a.node_count > 1 for a in alternatives):
            # the same nodes (they are alike whatever their place), now on the fabric
            places = fleet_places()
            whole.places = places
            alternatives = placement_alternatives(
                Planner(whole.of_kind(request.scheduler)), request, excluded
            )
        if profile:
            elsewhere = mig_elsewhere(whole, request, {p.cluster for p in plans})
        reason = _reason(request, plans, planner, whole, elsewhere)
    in_scope = {p.cluster for p in plans}
    needing = nodes_needing_action(n for n in fleet.nodes if n.cluster in in_scope)
    chosen, spare = _own_facts(chosen, spare, fleet, filters)
    servers = {o.node.server_id for o in chosen + spare if o.node.server_id is not None}
    answered = fleet.with_details(*answer_details(servers))
    return PlacementResult(
        fits=best is not None,
        total_gpus=sum(o.m for o in chosen),
        requested_gpus=(best.shape.total if best else _requested_total(request)),
        cluster=best.cluster if best else request.cluster,
        kind=best.kind if best else None,
        nodes=[node_choice(o, answered, filters) for o in chosen],
        reason=reason,
        candidates=[node_choice(o, answered, filters) for o in spare],
        alternatives=alternatives,
        blocked=name_holders(_blocked_list(blocked), fleet.held),
        # "model" nodes are out of scope, not excluded: the blocked list leaves them out too
        blocked_counts=dict(blocked_counts(blocked)),
        clusters=[
            ClusterAnswer(
                cluster=p.cluster,
                kind=p.kind,
                fits=p.fits,
                request=p.shape.describe(p.kind, p.mig_profile),
                total_gpus=p.total if p.fits else 0,
                node_count=len(p.chosen) if p.fits else 0,
                reason=p.reason,
                models=p.models if p.fits else [],
                mixes_models=p.fits and p.mixes_models,
                mig_profile=p.mig_profile,
            )
            for p in plans
        ],
        request=request.as_params(),
        models=best.models if best else [],
        cost=mixing_cost(best.models) if best and best.mixes_models else None,
        scheduler=request.scheduler,
        scope=_scope_text(request, fleet.clusters()),
        fabric=_fabric(best.locality) if best and best.locality else None,
        needing_action=needing[:BLOCKED_LIMIT],
        gpus_needing_action=sum(n.gpus for n in needing),
        health=needing_action_words(needing),
        mig_profile=best.mig_profile if best else None,
        mig_elsewhere=elsewhere,
    )


class FleetReads(NamedTuple):
    """What every read of one answer shares (`fleet_load`'s keywords): the fleet's own, read
    once, not again for the other clusters' nodes."""

    held: dict[int, HeldOnNode]
    actions: dict[int, tuple[int, str, int, int]]
    criticals: Criticals


def _alternatives_fleet(
    request: PlacementRequest, fleet: Fleet, places: dict[int, Place] | None, shared: FleetReads
) -> Fleet:
    """The fleet the alternatives are planned on: the request's, merged with every other
    cluster's when it named one. Those are read (a fixed number of queries) only when the
    request may fit in one of them (`may_fit_elsewhere`, one query: their nodes' free GPUs by
    their schedulers' figures); else their nodes are left out, as the same request there
    would be no alternative."""
    if request.cluster:
        if not counts_decide(request) or may_fit_elsewhere(
            request, free_elsewhere(request.cluster)
        ):
            others = fleet_load(
                other_than=request.cluster, with_mig=bool(request.mig_profile), **shared._asdict()
            )
            fleet = fleet_merge(fleet, others, request.cluster)
        else:  # the request's fleet holds the nodes of others on its servers: not them
            fleet = replace(fleet, nodes=[n for n in fleet.nodes if n.cluster == request.cluster])
    fleet.places = places or {}
    return fleet


def _kind_label(kind: str) -> str:
    return str(ClusterKind(kind).label)


def _check_scheduler(request: PlacementRequest, clusters: dict[str, str]) -> None:
    """A request for one scheduler cannot name a cluster of the other."""
    kind = clusters.get(request.cluster or "")
    if request.scheduler and kind and kind != request.scheduler:
        raise PlacementRequestError(
            "scheduler",
            f"{request.cluster} is a {_kind_label(kind)} cluster, "
            f"not {_kind_label(request.scheduler)}",
        )


def _scope_text(request: PlacementRequest, clusters: dict[str, str]) -> str | None:
    """`Kubernetes clusters only: hpc (Slurm) not considered`, for a request over every cluster
    that names its scheduler."""
    if not request.scheduler or request.cluster:
        return None
    text = f"{_kind_label(request.scheduler)} clusters only"
    others = sorted(c for c, k in clusters.items() if k != request.scheduler)
    if others:
        shown = ", ".join(f"{c} ({_kind_label(clusters[c])})" for c in others)
        text += f": {shown} not considered"
    return text


def _may_span_nodes(request: PlacementRequest) -> bool:
    """Whether a scheduler it may go to could place the request on several nodes (then its
    fabric matters): never a Kubernetes pod, which runs on one node."""
    if request.scheduler:
        kinds = [request.scheduler]
    else:
        kind = cluster_kind(request.cluster) if request.cluster else None
        kinds = [kind] if kind else list(ClusterKind.values)
    shapes = [request_shape(request, kind) for kind in kinds]
    return any((s.count or 1) > 1 or (s.spread and s.total > 1) for s in shapes)


def mixing_cost(models: list[str]) -> str:
    """The words for a job placed over several GPU models (only when no one model fits, unless
    the request allowed mixing)."""
    return f"mixes GPU models ({', '.join(models)}): it runs at the slowest GPU's pace"


def _fabric(locality: Locality) -> dict[str, Any] | None:
    """The answer's `fabric`: how far apart the nodes chosen are, and why (multi-node only)."""
    if locality.nodes < 2:
        return None
    return {
        "hops": locality.hops,
        "leaves": locality.leaves,
        "spine_groups": locality.spine_groups,
        "nvlink_domains": locality.nvlink_domains,
        "why": locality.why,
    }


def _requested_total(request: PlacementRequest) -> int:
    return request_shape(request, ClusterKind.KUBERNETES).total


def _reason(
    request: PlacementRequest,
    plans: list[ClusterPlan],
    planner: Planner,
    whole: Fleet,
    elsewhere: list[MigElsewhere],
) -> str:
    """Why the request does not fit; a MIG request says where its profile is free instead
    (`elsewhere`), or which profiles the fleet (`whole`) has."""
    none_free = False
    if not plans:
        if request.scheduler and not request.cluster:
            text = f"no {_kind_label(request.scheduler)} cluster with nodes"
        elif request.cluster:
            text = f"no cluster {request.cluster!r} with nodes (post a snapshot of it first)"
        else:
            text = "no scheduler nodes known (post a Kubernetes or Slurm snapshot first)"
    elif request.mig_profile and not _mig_devices(planner, request, free=True):
        none_free = True
        free = "" if not _mig_devices(planner, request, free=False) else "free "
        text = f"no {free}{request.mig_profile} in {_scope_words(request, plans)}"
    elif len(plans) == 1:
        text = plans[0].reason or ""
    else:
        text = "fits in no cluster: " + "; ".join(f"{p.cluster}: {p.reason}" for p in plans)
    notes = [e.text for e in elsewhere]
    if none_free and not elsewhere:
        offered = fleet_mig_profiles(whole, "")
        notes.append(
            "MIG profiles of the fleet: " + ", ".join(offered) if offered else "no MIG anywhere"
        )
    return "; ".join([text, *notes])


def _mig_devices(planner: Planner, request: PlacementRequest, *, free: bool) -> int:
    """MIG devices answering the request in the clusters it asked (the planner's): free now,
    or offered by their schedulers at all."""
    filters = Filters.of(request)
    count = 0
    for profile in fleet_mig_profiles(planner.fleet, request.mig_profile or ""):
        for offer in planner.offers(replace(filters, mig_profile=profile)):
            if not isinstance(offer, Offer):
                continue
            node = offer.node
            if not request.cluster or node.cluster == request.cluster:
                count += (
                    offer.free if free else node.mig_allocatable.get(profile, 0)
                ) * node.weight
    return count


def _scope_words(request: PlacementRequest, plans: list[ClusterPlan]) -> str:
    """`cluster hpc`, `Slurm clusters (hpc)`, `any cluster`: where a request looked."""
    if request.cluster:
        return f"cluster {request.cluster}"
    names = ", ".join(p.cluster for p in plans)
    if request.scheduler:
        return f"{_kind_label(request.scheduler)} clusters ({names})"
    return f"any cluster ({names})"


def _candidates(best: ClusterPlan, others: list[ClusterPlan]) -> list[Option]:
    """More nodes that could take the request (or a share of it), any cluster, best first."""
    spare = list(best.spare)
    for plan in others:
        spare.extend(plan.chosen + plan.spare)
    if best.shape.spread:
        spare.sort(key=lambda o: (-o.m, o.rank))
    else:
        spare.sort(key=lambda o: o.rank)
    return spare[:CANDIDATE_LIMIT]


def _own_facts(
    chosen: list[Option], spare: list[Option], fleet: Fleet, filters: Filters
) -> tuple[list[Option], list[Option]]:
    """The options of the answer on twins, with each twin's own GPUs read and its GPU set
    chosen among them (the planner worked on its stand-in's)."""
    twins = [o.node for o in chosen + spare if o.node.twin_of is not None]
    if not twins:
        return chosen, spare
    own = twins_load(twins, fleet, with_mig=bool(filters.mig_profile))

    def mine(option: Option) -> Option:
        node = own.get(option.node.id)
        if node is None:
            return option
        offer = node_offer(node, filters)
        again = option_for(offer, option.m, fleet, filters) if isinstance(offer, Offer) else None
        gpu_set = again.gpu_set if isinstance(again, Option) else None
        return replace(option, node=node, gpu_set=gpu_set)

    return [mine(o) for o in chosen], [mine(o) for o in spare]


def _blocked_list(blocked: list[BlockedNode]) -> list[BlockedNode]:
    order = {r: i for i, r in enumerate(BLOCK_ORDER)}
    seen: set[int] = set()
    unique = []
    rows = [row for b in blocked for row in b.members(BLOCKED_LIMIT)]
    for b in sorted(rows, key=lambda b: (order.get(b.reason, 99), b.cluster, b.node)):
        if b.node_id not in seen and b.reason != "model":
            seen.add(b.node_id)
            unique.append(b)
    return unique[:BLOCKED_LIMIT]


def name_holders(rows: list[BlockedNode], held: dict[int, HeldOnNode]) -> list[BlockedNode]:
    """Each passed-over node names the running workloads holding its GPUs, the most GPUs
    first (two queries for those rows' workloads and their labels, none when no row holds
    any)."""
    holding = held_workloads(r.node_id for r in rows if r.node_id in held)
    labels = workload_labels({w for on in holding.values() for w in on})
    for row in rows:
        on = holding.get(row.node_id)
        if not on:
            continue
        ranked = sorted(on.items(), key=lambda kv: (-kv[1], kv[0]))
        row.filled_by = [holder_text(labels.get(w), n) for w, n in ranked]
    return rows


def holder_text(label: tuple[str, str, str] | None, gpus: int) -> str:
    """`job 5679 of alice, 8 GPUs` (`workload_label`); `a workload, 8 GPUs` unnamed."""
    if label is None:
        return f"a workload, {gpus} GPU{'s' if gpus != 1 else ''}"
    kind, scheduler_id, user = label
    return workload_label(kind, scheduler_id, user, gpus)


def fleet_fragmentation(*, cluster: str | None = None) -> list[ClusterFragmentation]:
    """The fleet's fragmentation per cluster now (`fragmentation`): every schedulable node's
    whole GPUs and how many are free, the GPUs running workloads hold counted as used
    (`selectors.fleet_counts` with them: six queries, whatever the fleet)."""
    fleet = fleet_counts(cluster=cluster, with_held=True)
    free = node_free_gpus(fleet)
    nodes = []
    for node in fleet.nodes:
        if node.id not in free:
            continue
        usable = node.healthy_whole if node.healthy_whole is not None else len(node.gpus)
        capacity = min(node.whole_allocatable, usable) if usable else node.whole_allocatable
        nodes.append(
            NodeFree(node.cluster, node.kind, capacity, min(free[node.id], capacity), node.weight)
        )
    return fragmentation(nodes)


def capacity_plan(
    *, gpus: int, per_server: Iterable[int], nvlink: bool = True, model: str | None = None
) -> dict:
    """The capacity planner as the API and the page answer it: `capacity_compare` at the
    fleet's share of GPUs needing action now (one query), beside the fleet's fragmentation
    now (`fleet_fragmentation`). Raises CapacityRequestError."""
    compared = capacity_compare(
        gpus=gpus,
        per_server=per_server,
        nvlink=nvlink,
        model=model,
        action_share=needing_action_share(),
    )
    return {**compared, "fragmentation": fleet_fragmentation()}
