"""Dashboard pages of the scheduler layer: nodes beside their servers, and findings."""

from __future__ import annotations

from contextlib import suppress

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.response import TemplateResponse

from core.tables import table_page

from . import selectors
from .choices import Severity
from .filters import FindingFilter, NodeFilter
from .forms import AcknowledgeForm, NodeBindForm, SilenceForm
from .parsers.records import gres_text
from .runbook import runbook_html, runbook_url
from .services import (
    FindingActionRejected,
    finding_acknowledge,
    finding_silence,
    finding_unacknowledge,
    finding_unsilence,
    node_bind,
)
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


UNDO_ACTIONS = {"unacknowledge": finding_unacknowledge, "unsilence": finding_unsilence}
"""The page's buttons that take an action back: they carry no form, only who and when."""


@login_required
def finding_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One finding: what, where, since when, the runbook, and (staff) acknowledge or silence,
    and take either back."""
    finding = get_object_or_404(selectors.finding_list(), pk=pk)
    ack_form, silence_form = AcknowledgeForm(prefix="ack"), SilenceForm(prefix="silence")
    if request.method == "POST":
        if not request.user.is_staff:
            raise PermissionDenied
        action = request.POST.get("action")
        undo = UNDO_ACTIONS.get(action or "")
        if undo is not None:
            # Already undone (another tab, another person): the page shows how things stand.
            with suppress(FindingActionRejected):
                undo(finding=finding, user=request.user)
            return redirect("finding-detail", pk=finding.pk)
        form: AcknowledgeForm | SilenceForm
        if action == "acknowledge":
            form = ack_form = AcknowledgeForm(request.POST, prefix="ack")
        else:
            form = silence_form = SilenceForm(request.POST, prefix="silence")
        if form.is_valid():
            try:
                if action == "acknowledge":
                    finding_acknowledge(
                        finding=finding, user=request.user, reason=form.cleaned_data["reason"]
                    )
                else:
                    finding_silence(
                        finding=finding,
                        user=request.user,
                        reason=form.cleaned_data["reason"],
                        until=form.cleaned_data["until"],
                    )
                return redirect("finding-detail", pk=finding.pk)
            except FindingActionRejected as exc:
                for field, messages in exc.errors.items():
                    for message in messages:
                        form.add_error(field if field in form.fields else None, message)
    return render(
        request,
        "clusters/finding_detail.html",
        {
            "finding": finding,
            "runbook_url": runbook_url(finding.type),
            "silenced": finding.silenced(),
            "ack_form": ack_form,
            "silence_form": silence_form,
        },
    )


@login_required
def runbook(request: HttpRequest) -> HttpResponse:
    """docs/findings.md as a page: `#<type>` anchors what each finding means and what to do."""
    return render(request, "clusters/runbook.html", {"runbook": runbook_html()})


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
            "findings": selectors.open_findings(node_id=node.pk),
            "bind_form": bind_form,
            "servers": selectors.server_picker() if request.user.is_staff else [],
        },
    )
