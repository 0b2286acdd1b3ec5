"""What would fit instead: nearby requests planned on the same fleet, the closest of each kind.

Pure, like the planner: the service reads the fleet once (with the other clusters when the
request named one) and asks here only when the request does not fit.
"""

from __future__ import annotations

from dataclasses import replace

from clusters.choices import ClusterKind
from inventory.gpu_models import gpu_model_matches, model_key

from .facts import Fleet
from .planner import Planner, plan_request
from .types import Alternative, PlacementRequest, request_shape

ALTERNATIVE_LIMIT = 6


def placement_alternatives(planner: Planner, request: PlacementRequest) -> list[Alternative]:
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
    for group in groups:
        alternative = _first_fit(planner, group)
        if alternative is None:
            continue
        signature = (alternative.cluster, alternative.total_gpus, *alternative.nodes)
        if signature not in seen:
            seen.add(signature)
            found.append(alternative)
        if len(found) >= ALTERNATIVE_LIMIT:
            break
    return found


def _first_fit(planner: Planner, tries: list[tuple[str, PlacementRequest]]) -> Alternative | None:
    for description, attempt in tries:
        fitting = sorted(
            (p for p in plan_request(planner, attempt) if p.fits), key=lambda p: p.rank()
        )
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
