"""Dashboard pages that span the layers: overview, server page, topology, placement."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from inventory import selectors as inventory_selectors

from .interconnect import server_interconnect


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "topology/overview.html",
        {
            "fleet": inventory_selectors.fleet_summary(),
            "changes": inventory_selectors.recent_changes(),
        },
    )


@login_required
def server_detail(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(inventory_selectors.server_detail(), pk=pk)
    interconnect = server_interconnect(server)
    return render(
        request,
        "topology/server_detail.html",
        {
            "server": server,
            "gpus": list(server.gpus.all()),
            "interconnect": interconnect,
            "matrix_rows": list(zip(interconnect["devices"], interconnect["matrix"], strict=True)),
        },
    )


@login_required
def topology(request: HttpRequest) -> HttpResponse:
    return render(request, "topology/topology.html", {})


@login_required
def placement(request: HttpRequest) -> HttpResponse:
    return render(request, "topology/placement.html", {})
