"""Dashboard pages of the scheduler layer: nodes beside their servers."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse

from core.tables import table_page
from findings import selectors as finding_selectors

from . import selectors
from .filters import NodeFilter
from .forms import NodeBindForm
from .parsers.records import gres_text
from .services import node_bind
from .tables import NODE_FILTERS, NODE_TABLE


@login_required
def node_list(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    return table_page(
        request,
        table=NODE_TABLE,
        filterset=NodeFilter(request.GET, queryset=selectors.node_list()),
        filters=NODE_FILTERS,
        known=lambda: {"cluster": selectors.cluster_names(), "state": selectors.node_states()},
        template="clusters/node_list.html",
        prepare=selectors.nodes_with_expected,
    )


@login_required
def node_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """What the scheduler says about one node, its server, its findings; staff bind it."""
    node = get_object_or_404(selectors.node_detail(), pk=pk)
    bind_form = NodeBindForm(initial={"server": node.server.hostname if node.server else ""})
    if request.method == "POST":
        if not request.user.is_staff:
            raise PermissionDenied
        if request.POST.get("action") == "unbind":
            node_bind(node=node, server=None)
            return redirect("node-detail", pk=node.pk)
        bind_form = NodeBindForm(request.POST)
        if bind_form.is_valid():
            node_bind(node=node, server=bind_form.cleaned_data["server"])
            return redirect("node-detail", pk=node.pk)
    # A TemplateResponse, so that topology's node page can add what clusters/ cannot know.
    return TemplateResponse(
        request,
        "clusters/node_detail.html",
        {
            "node": node,
            "labels": selectors.node_labels_that_matter(node.labels or {}),
            "gres": [gres_text(g) for g in node.gres if isinstance(g, dict)],
            "findings": finding_selectors.open_findings(node_id=node.pk),
            "bind_form": bind_form,
            "servers": selectors.server_picker() if request.user.is_staff else [],
        },
    )
