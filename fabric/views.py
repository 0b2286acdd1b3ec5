"""Fabric pages: thin, each reads through fabric.selectors / fabric.tables and renders."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render

from core.tables import table_page

from .filters import SwitchFilter
from .models import Fabric
from .render import fabric_figures
from .selectors import switch_ports
from .tables import SWITCH_FILTERS, SWITCH_TABLE, switch_rows


def _figures() -> list[dict]:
    """Every fabric's figure, in a fixed number of queries however many fabrics there are
    (a large fabric's as stored at its revision: `fabric.render`)."""
    fabrics = list(Fabric.objects.defer("node_name_map", "node_names"))
    figures = fabric_figures(fabrics)
    return [
        {"name": fabric.name, "summary": fabric.summary, "figure": figures[fabric.pk]}
        for fabric in fabrics
    ]


@login_required
def fabric_page(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """Every fabric's figure, and the switch list (sortable, filterable, CSV)."""
    return table_page(
        request,
        table=SWITCH_TABLE,
        filterset=SwitchFilter(request.GET, queryset=switch_rows()),
        filters=SWITCH_FILTERS,
        template="fabric/fabric.html",
        known=lambda: {"fabric": list(Fabric.objects.values_list("name", flat=True))},
        context=lambda: {"fabrics": _figures()},
    )


@login_required
def switch_detail(request: HttpRequest, pk: int) -> HttpResponse:
    switch = get_object_or_404(switch_rows(), pk=pk)
    return render(
        request, "fabric/switch_detail.html", {"switch": switch, "ports": switch_ports(switch)}
    )
