"""Dashboard pages that span the layers: overview, server page, node page, topology, search."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.template.response import TemplateResponse

from clusters import selectors as cluster_selectors
from clusters import views as cluster_views
from fabric import views as fabric_views
from findings import selectors as finding_selectors
from health import views as health_views
from health.selectors import health_overview
from inventory import selectors as inventory_selectors
from workloads import selectors as workload_selectors

from .fabric_names import fabric_schedulers, node_fabric_labels
from .figures import highlight_gpus
from .interconnect import server_interconnect
from .render import server_figures
from .search import search as global_search
from .server_page import (
    gpus_in_page_order,
    node_commands_for,
    server_page,
    with_holders,
    worst_first,
)
from .workload_page import gpu_workloads, workload_page


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "topology/overview.html",
        {
            "fleet": inventory_selectors.fleet_summary(),
            "changes": inventory_selectors.recent_changes(),
            "nodes": cluster_selectors.scheduler_summary(),
            "top_findings": finding_selectors.top_open_findings(limit=8),
            "health": health_overview(),
            "workloads": workload_selectors.workload_counts(),
        },
    )


@login_required
def server_detail(request: HttpRequest, pk: int) -> HttpResponse:
    page = server_page(pk)
    if page is None:
        raise Http404("no such server")
    server = page["server"]
    interconnect = server_interconnect(server)
    figures = server_figures(server, interconnect=interconnect)
    chosen = _chosen_gpus(request.GET.get("gpus", ""))
    if chosen and "interconnect_matrix" in figures:
        figures["interconnect_matrix"] = highlight_gpus(
            figures["interconnect_matrix"], interconnect, chosen
        )
    return render(
        request,
        "topology/server_detail.html",
        {
            **page,
            "interconnect": interconnect,
            "figures": figures,
            "chosen_gpus": chosen,
            "matrix_rows": list(zip(interconnect["devices"], interconnect["matrix"], strict=True)),
        },
    )


@login_required
def workload_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One workload: its GPUs per node, drawn on its servers' interconnect, its locality."""
    page = workload_page(pk)
    if page is None:
        raise Http404("no such workload")
    return render(request, "topology/workload.html", page)


@login_required
def node_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """clusters' node page, plus the Kubernetes labels its server's fabric suggests
    (clusters/ may not import fabric/; this layer joins them), its server's GPUs, each
    linking its GPU page and saying who holds it now, the workloads that ended on the node
    lately, and the commands to drain or cordon it."""
    response = cluster_views.node_detail(request, pk)
    if isinstance(response, TemplateResponse) and response.context_data is not None:
        context = response.context_data
        node = context["node"]
        context["fabric_labels"] = node_fabric_labels(node)
        findings = list(context["findings"])
        context["findings"] = findings
        worst = findings
        if node.server_id is not None:
            gpus = list(inventory_selectors.server_gpus(node.server_id))
            held = workload_selectors.held_now(server_id=node.server_id)
            context["gpus"] = gpus_in_page_order(with_holders(gpus, held))
            worst = worst_first(
                findings + list(finding_selectors.open_findings(server_id=node.server_id))
            )
        context["commands"] = node_commands_for([node], worst)
        context["workloads_shown"] = True
        context["recent_workloads"] = workload_selectors.recent_workloads(node_id=node.pk)
    return response


@login_required
def gpu_detail(request: HttpRequest, pk: int) -> HttpResponse | StreamingHttpResponse:
    """health's GPU page, plus who holds the GPU now and the workloads it ran, by serial
    (health/ sits below workloads/; this layer joins them)."""
    return health_views.gpu_page(
        request, pk, template="topology/gpu.html", extra=lambda h: gpu_workloads(h["gpu"])
    )


@login_required
def fabric_page(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """fabric's page, with an "Export for Slurm" per Slurm cluster on each fabric and
    "Labels for Kubernetes" where a Kubernetes cluster is (one query; fabric/ may not
    import clusters/, this layer joins them)."""
    return fabric_views.fabric_page_with(request, fabric_schedulers())


@login_required
def search(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "").strip()
    groups = global_search(query)
    return render(
        request,
        "topology/search.html",
        {"query": query, "groups": groups, "found": sum(g.total for g in groups)},
    )


@login_required
def topology(request: HttpRequest) -> HttpResponse:
    return render(request, "topology/topology.html", {})


def _chosen_gpus(value: str) -> list[int]:
    """`?gpus=0,1,2,3` from a placement answer: the GPU indexes to highlight."""
    indexes = [int(part) for part in value.split(",")[:64] if part.strip().isdigit()]
    return sorted({i for i in indexes if i < 64})
