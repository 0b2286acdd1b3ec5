"""Dashboard pages of the scheduler layer: nodes beside their servers, and findings."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse

from core.tables import table_page

from . import selectors
from .choices import Severity
from .filters import FindingFilter, NodeFilter
from .tables import FINDING_FILTERS, NODE_FILTERS, NODE_TABLE, finding_table


@login_required
def node_list(request: HttpRequest) -> HttpResponse:
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
def finding_list(request: HttpRequest) -> HttpResponse:
    params = request.GET.copy()
    params.setdefault("open", "true")
    return table_page(
        request,
        table=finding_table(open_only=params["open"] != "false"),
        filterset=FindingFilter(params, queryset=selectors.finding_list()),
        filters=FINDING_FILTERS,
        known=lambda: {"cluster": selectors.cluster_names()},
        template="clusters/finding_list.html",
        context=lambda: {
            "open": params["open"],
            "severities": Severity.choices,
            "by_severity": selectors.open_findings_by_severity(),
        },
    )
