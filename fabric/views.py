"""Fabric pages: thin, each reads through fabric.selectors / fabric.tables and renders."""

from __future__ import annotations

from collections.abc import Mapping

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render

from core.tables import table_page

from .filters import SwitchFilter
from .models import Fabric
from .render import fabric_figures
from .selectors import switch_ports
from .tables import SWITCH_FILTERS, SWITCH_TABLE, switch_rows

Schedulers = Mapping[str, Mapping[str, list[str]]]


def _figures(schedulers: Schedulers | None) -> list[dict]:
    """Every fabric's figure, in a fixed number of queries however many fabrics there are
    (a large fabric's as stored at its revision: `fabric.render`), and its exports: one
    "Export for Slurm" per Slurm cluster on it (one without a cluster where none or
    `schedulers` is not known), "Labels for Kubernetes" where a Kubernetes cluster is."""
    fabrics = list(Fabric.objects.defer("node_name_map", "node_names"))
    figures = fabric_figures(fabrics)
    answer = []
    for fabric in fabrics:
        kinds = schedulers.get(fabric.name, {}) if schedulers is not None else None
        slurm = list(kinds.get("slurm", [])) if kinds is not None else []
        answer.append(
            {
                "name": fabric.name,
                "summary": fabric.summary,
                "figure": figures[fabric.pk],
                "slurm": slurm if len(slurm) > 1 else [""],
                "kubernetes": kinds is None or bool(kinds.get("kubernetes")),
            }
        )
    return answer


@login_required
def fabric_page(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """Every fabric's figure, and the switch list (sortable, filterable, CSV)."""
    return fabric_page_with(request)


def fabric_page_with(
    request: HttpRequest, schedulers: Schedulers | None = None
) -> HttpResponse | StreamingHttpResponse:
    """The fabric page; `schedulers` (fabric name -> scheduler kind -> cluster names), from
    the layer that reads both (topology/), picks its export buttons."""
    return table_page(
        request,
        table=SWITCH_TABLE,
        filterset=SwitchFilter(request.GET, queryset=switch_rows()),
        filters=SWITCH_FILTERS,
        template="fabric/fabric.html",
        known=lambda: {"fabric": list(Fabric.objects.values_list("name", flat=True))},
        context=lambda: {"fabrics": _figures(schedulers)},
    )


@login_required
def switch_detail(request: HttpRequest, pk: int) -> HttpResponse:
    switch = get_object_or_404(switch_rows(), pk=pk)
    return render(
        request, "fabric/switch_detail.html", {"switch": switch, "ports": switch_ports(switch)}
    )
