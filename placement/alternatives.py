"""What would fit instead: nearby requests planned on the same fleet, the closest of each kind.

Pure, like the planner: the service reads the fleet once (with the other clusters when the
request named one) and asks here only when the request does not fit. An alternative is its
query parameters and the answer they get: planned as `placement_find` plans them (one GPU
model per job unless mixing is asked), so following it gives the nodes it names; and never on
a node the answer it stands beside excluded (drained, not ready, a lost or unhealthy GPU, GPUs
needing action): an alternative whose answer takes one is not offered. Like the planner, the
alternatives keep off nodes with a critical finding while another try of the same kind fits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Set as AbstractSet
from dataclasses import replace

from clusters.choices import ClusterKind
from inventory.gpu_models import gpu_model_matches, model_key

from .facts import Fleet
from .planner import Offer, Planner, fleet_mig_profiles, plan_request
from .types import Alternative, Filters, MigElsewhere, PlacementRequest, request_shape

ALTERNATIVE_LIMIT = 6
MIG_ELSEWHERE_NODES = 5
"""Nodes a MIG answer names where the profile is free outside the clusters asked."""


def placement_alternatives(
    planner: Planner, request: PlacementRequest, excluded: AbstractSet[int] = frozenset()
) -> list[Alternative]:
    """Nearby requests that fit now, the closest of each kind: the same GPUs on more nodes,
    fewer GPUs per node, mixing GPU models, another model, another cluster, fewer
    constraints; none whose answer takes a node of `excluded` (node ids)."""
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
    if not request.mix_models:
        groups.append([("the same request mixing GPU models", replace(request, mix_models=True))])
    if request.model:
        groups += [
            [(f"the same request on {model}", replace(request, model=model))]
            for model in fleet_models(planner.fleet)
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
    planner = planner.avoiding(excluded) if excluded else planner
    for group in groups:
        alternative = _first_fit(planner, group, excluded)
        if alternative is None:
            continue
        signature = (alternative.cluster, alternative.total_gpus, *alternative.nodes)
        if signature not in seen:
            seen.add(signature)
            found.append(alternative)
        if len(found) >= ALTERNATIVE_LIMIT:
            break
    return found


def _first_fit(
    planner: Planner, tries: list[tuple[str, PlacementRequest]], excluded: AbstractSet[int]
) -> Alternative | None:
    """The first try that fits without an excluded node, in the cluster that answers it best;
    one whose answer takes a node with a critical finding (a lost GPU: the job may be lost)
    only when no other try of the group fits, and saying so."""
    fallback: Alternative | None = None
    for description, attempt in tries:
        fitting = sorted(
            (
                p
                for p in plan_request(planner, attempt)
                if p.fits and not p.avoided and not any(o.node.id in excluded for o in p.chosen)
            ),
            key=lambda p: (any(o.node.critical_findings for o in p.chosen), p.rank()),
        )
        if not fitting:
            continue
        plan = fitting[0]
        troubled = any(o.node.critical_findings for o in plan.chosen)
        alternative = Alternative(
            description=f"{description} ({plan.cluster}, {plan.kind}"
            + ("; on a node with a critical finding)" if troubled else ")"),
            cluster=plan.cluster,
            kind=plan.kind,
            total_gpus=plan.total,
            node_count=len(plan.chosen),
            gpus_per_node=max(o.m for o in plan.chosen),
            nodes=[o.node.name for o in plan.chosen],
            params={**attempt.as_params(), "cluster": plan.cluster},
        )
        if not troubled:
            return alternative
        fallback = fallback or alternative
    return fallback


def counts_decide(request: PlacementRequest) -> bool:
    """Whether the other clusters' free GPU counts can tell that the request fits none of
    them (`may_fit_elsewhere`): not for a MIG request (it counts devices) nor one naming a
    model (its alternatives range over the whole fleet)."""
    return not (request.mig_profile or request.model)


def may_fit_elsewhere(
    request: PlacementRequest, free: dict[tuple[str, str], dict[int, int]]
) -> bool:
    """Whether the request, asked in another cluster (`free`: `selectors.free_elsewhere`), may
    fit there: False only where no answer of `plan_request` can (so "the same request in"
    those clusters is no alternative, and their nodes need not be read).

    A Kubernetes node gives a request at most its scheduler's allocatable GPUs less those it
    says are used (`planner.node_offer`: never more, whatever its GPUs, the workloads holding
    them or another scheduler on its server), and a pod runs on one node. A Slurm node's
    GPUs are its GRES, not those columns; a MIG request counts devices, and a request naming a
    model looks for that model's alternatives over the whole fleet: each of those may fit.
    A cluster without nodes counted (`{}`) holds nothing."""
    if not counts_decide(request):
        return True
    for (name, kind), nodes in free.items():
        if kind != ClusterKind.KUBERNETES:
            return True
        shape = request_shape(replace(request, cluster=name), kind)
        per_node = shape.per_node or shape.total
        if sum(n for figure, n in nodes.items() if figure >= per_node) >= (shape.count or 1):
            return True
    return False


def fleet_models(fleet: Fleet) -> list[str]:
    """GPU models present, one spelling each (NVML names before scheduler labels)."""
    names: dict[str, str] = {}
    for node in fleet.nodes:
        for gpu in node.gpus:
            if gpu.name:
                names.setdefault(model_key(gpu.name), gpu.name)
    for node in fleet.nodes:
        if not node.gpus and node.products:
            product = node.products[0]
            if not any(gpu_model_matches(product, n) for n in names.values()):
                names.setdefault(model_key(product), product)
    return sorted(names.values())


def mig_elsewhere(
    fleet: Fleet, request: PlacementRequest, in_scope: set[str]
) -> list[MigElsewhere]:
    """Where MIG devices answering the request's profile (and its model and memory) are free
    in the clusters of `fleet` outside `in_scope`, the most first: schedulable nodes, their
    devices' GPUs healthy, not in use. Partitions are a cluster's own: not asked here."""
    planner = Planner(replace(fleet, nodes=[n for n in fleet.nodes if n.cluster not in in_scope]))
    filters = replace(Filters.of(request), partition=None)
    found: dict[str, tuple[str, Counter[str], set[str]]] = {}
    for profile in fleet_mig_profiles(planner.fleet, request.mig_profile or ""):
        for offer in planner.offers(replace(filters, mig_profile=profile)):
            if not isinstance(offer, Offer) or not offer.free:
                continue
            node = offer.node
            kind, per_node, profiles = found.setdefault(node.cluster, (node.kind, Counter(), set()))
            profiles.add(profile)
            for _node_id, name, _server, _host in node.identities:
                per_node[name] += offer.free
    rows = []
    for name, (kind, per_node, profiles) in found.items():
        ranked = sorted(per_node, key=lambda n: (-per_node[n], n))
        rows.append(
            MigElsewhere(
                cluster=name,
                kind=kind,
                free=sum(per_node.values()),
                profiles=sorted(profiles),
                nodes=ranked[:MIG_ELSEWHERE_NODES],
                more_nodes=max(len(ranked) - MIG_ELSEWHERE_NODES, 0),
            )
        )
    rows.sort(key=lambda r: (-r.free, r.cluster))
    return rows
