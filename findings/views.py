"""Dashboard pages of findings: the list (open, resolved), one finding with its actions, and
the runbook."""

from __future__ import annotations

from contextlib import suppress

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from core.tables import table_page

from . import selectors
from .choices import Severity
from .filters import FindingFilter
from .forms import AcknowledgeForm, SilenceForm
from .runbook import runbook_html, runbook_url
from .services import (
    FindingActionRejected,
    finding_acknowledge,
    finding_silence,
    finding_unacknowledge,
    finding_unsilence,
)
from .tables import FINDING_FILTERS, finding_table


@login_required
def finding_list(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    params = request.GET.copy()
    params.setdefault("open", "true")
    return table_page(
        request,
        table=finding_table(open_only=params["open"] != "false"),
        filterset=FindingFilter(params, queryset=selectors.finding_list()),
        filters=FINDING_FILTERS,
        known=lambda: {"cluster": selectors.finding_cluster_names()},
        template="findings/finding_list.html",
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
        "findings/finding_detail.html",
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
    return render(request, "findings/runbook.html", {"runbook": runbook_html()})
