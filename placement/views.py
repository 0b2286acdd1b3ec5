"""The placement page: where a job fits, what a failure takes, dense vs sparse servers.

Server-rendered from the same services as the API (`placement_find`, `failure_domain`,
`capacity_plan`); forms are GET, so every answer is a link that can be shared.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from clusters.choices import ClusterKind
from core.links import workload_path
from health.selectors import gpus_needing_action, gpus_needing_action_by_reason

from .api.serializers import CapacityQuerySerializer, PlacementQuerySerializer
from .capacity import CapacityRequestError
from .failure_domains import (
    FailureDomainError,
    fabric_switch_choices,
    failure_domain,
    failure_domain_choices,
    failure_domain_rankings,
    server_resolve,
)
from .failure_domains.arithmetic import percent, workload_words
from .fragmentation import fragmentation_figure
from .selectors import placement_choices
from .service import capacity_plan, fleet_fragmentation, placement_find
from .types import PlacementRequestError, mig_slices, reason_text

TABS = (
    ("placement", "Where a job fits"),
    ("failure", "Failure domains"),
    ("capacity", "Capacity planner"),
)
PLACEMENT_KEYS = ("gpus", "nodes", "gpus_per_node", "mig_profile")
PLACEMENT_BOXES = ("nvlink_only", "same_numa", "mix_models")
"""The form's checkboxes: ticked as the request reads them (`mix_models=false` is unticked)."""
TRUE = {"true", "1", "on", "yes", "y", "t"}
FIELD_LABELS = {
    "scheduler": "Scheduler",
    "cluster": "Cluster",
    "gpus": "GPUs",
    "nodes": "Nodes",
    "gpus_per_node": "GPUs per node",
    "model": "Model",
    "mig_profile": "MIG profile",
    "min_gpu_memory": "Min GPU memory",
    "partition": "Partition",
    "nvlink_only": "NVLink only",
    "same_numa": "One NUMA node",
    "mix_models": "Mix GPU models",
    "server": "Server",
    "rack": "Rack",
    "switch": "Switch",
    "per_server": "GPUs per server",
    "nvlink": "NVLink within a server",
}
"""Each parameter as the forms label it: an error names the field people see, not its key."""
SCHEDULER_CHOICES = (
    (ClusterKind.KUBERNETES.value, "Kubernetes (a pod)"),
    (ClusterKind.SLURM.value, "Slurm (a job)"),
)


@login_required
def placement_page(request: HttpRequest) -> HttpResponse:
    """`/placement/`: the tab named by `?tab=` (placement, failure, capacity)."""
    tab = request.GET.get("tab", "placement")
    if tab not in dict(TABS):
        tab = "placement"
    context: dict[str, Any] = {"tab": tab, "tabs": TABS}
    if tab == "placement":
        context.update(_placement(request))
    elif tab == "failure":
        context.update(_failure(request))
    else:
        context.update(_capacity(request))
    return render(request, "placement/placement.html", context)


def _errors(errors: dict[str, Any]) -> list[str]:
    return [_error(field, message) for field, messages in errors.items() for message in messages]


def _error(field: str, message: object) -> str:
    """`GPUs per node: ...`; a request-wide error (no field) is its message alone."""
    label = FIELD_LABELS.get(field)
    return f"{label}: {message}" if label else str(message)


def _placement(request: HttpRequest) -> dict[str, Any]:
    choices = placement_choices()
    context: dict[str, Any] = {
        "choices": choices,
        "mig_slices": mig_slices(choices["mig_profiles"]),
        "schedulers": SCHEDULER_CHOICES,
        "checked": {k: request.GET.get(k, "").strip().lower() in TRUE for k in PLACEMENT_BOXES},
        "result": None,
        "errors": [],
    }
    if not any(request.GET.get(k) for k in PLACEMENT_KEYS):
        return context
    query = PlacementQuerySerializer(data=request.GET)
    if not query.is_valid():
        context["errors"] = _errors(query.errors)
        return context
    try:
        result = placement_find(**query.to_service())
    except PlacementRequestError as exc:
        context["errors"] = [_error(exc.field, exc)]
        return context
    context["result"] = result
    context["blocked_counts"] = [(reason_text(r), n) for r, n in result.blocked_counts.items()]
    context["alternatives"] = [
        {"alternative": a, "query": urlencode({"tab": "placement", **a.params})}
        for a in result.alternatives
    ]
    return context


RANK_WORDS = {"gpus": "GPUs they take down", "workloads": "workloads they hit", "users": "users"}
"""The failure tab's rankings, by `?rank=` (the API's `rank`)."""


def _failure(request: HttpRequest) -> dict[str, Any]:
    rank = request.GET.get("rank", "gpus")
    rank = rank if rank in RANK_WORDS else "gpus"
    rankings = failure_domain_rankings(limit=10, rank=rank)
    context: dict[str, Any] = {
        "rank": rank,
        "rank_words": RANK_WORDS[rank],
        "rank_choices": list(RANK_WORDS),
        "choices": failure_domain_choices(),
        "fabric_switches": fabric_switch_choices(),
        "rack_ranking": rankings["rack"],
        "server_ranking": rankings["server"],
        "switch_ranking": rankings["switch"],
        "domain": None,
        "errors": [],
    }
    server_text = request.GET.get("server", "").strip()
    rack = request.GET.get("rack", "").strip()
    switch = request.GET.get("switch", "").strip()
    if not (server_text or rack or switch):
        return context
    try:
        server = server_resolve(server_text) if server_text else None
        domain = failure_domain(server=server, rack=rack or None, switch=switch or None)
    except FailureDomainError as exc:
        context["errors"] = [_error(exc.field, exc)]
        return context
    for row in domain["degraded_servers"]:  # 12.5%, as the words above the table say it
        row["share_words"] = percent(row["share_lost"] or 0.0)
    for work in domain["workloads"]:  # "job 5679 (alice, 16 GPUs)", linked to its page
        work["words"] = workload_words(work)
        work["path"] = workload_path(work["id"])
    context["domain"] = domain
    return context


def _capacity(request: HttpRequest) -> dict[str, Any]:
    context: dict[str, Any] = {"capacity": None, "errors": []}
    if not request.GET.get("gpus"):
        fragments = fleet_fragmentation()
        context["fragmentation"] = fragments
        context["fragmentation_figure"] = fragmentation_figure(fragments)
        return context
    data = request.GET.copy()
    data.setdefault("nvlink", "false")  # an unticked box sends nothing
    query = CapacityQuerySerializer(data=data)
    if not query.is_valid():
        context["errors"] = _errors(query.errors)
        return context
    try:
        context["capacity"] = capacity_plan(**query.validated_data)
        context["fragmentation"] = context["capacity"]["fragmentation"]
        context["fragmentation_figure"] = fragmentation_figure(context["fragmentation"])
        context["action_reasons"] = gpus_needing_action_by_reason(gpus_needing_action())
    except CapacityRequestError as exc:
        context["errors"] = [_error(exc.field, exc)]
    return context
