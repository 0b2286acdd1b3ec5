"""Dashboard pages of findings: the list (open, resolved), one finding with its actions, and
the runbook."""

from __future__ import annotations

from contextlib import suppress
from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from core.tables import table_page

from . import selectors
from .choices import Severity
from .filters import FindingFilter
from .forms import AcknowledgeForm, BulkActionForm, SilenceForm
from .runbook import runbook_html, runbook_url
from .services import (
    BulkAction,
    FindingActionRejected,
    finding_acknowledge,
    finding_silence,
    finding_unacknowledge,
    finding_unsilence,
    findings_act,
)
from .tables import FINDING_FILTERS, finding_table


@login_required
def finding_list(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """The findings, open or resolved, filtered; staff tick open ones and act on them at once
    (a POST here: 403 for anyone else)."""
    if request.method == "POST":
        return _bulk_action(request)
    params = request.GET.copy()
    params.setdefault("open", "true")
    open_only = params["open"] != "false"
    selectable = open_only and request.user.is_staff and request.GET.get("format") != "csv"
    return table_page(
        request,
        table=finding_table(open_only=open_only, selectable=selectable),
        filterset=FindingFilter(params, queryset=selectors.finding_list()),
        filters=FINDING_FILTERS,
        known=lambda: {"cluster": selectors.finding_cluster_names()},
        template="findings/finding_list.html",
        context=lambda: {
            "open": params["open"],
            "severities": Severity.choices,
            "by_severity": selectors.open_findings_by_severity(),
            "bulk_form": BulkActionForm() if selectable else None,
        },
    )


def _bulk_action(request: HttpRequest) -> HttpResponse:
    """The bulk bar's POST: the action on each ticked finding (`findings_act`), then back to
    the same list with what was done and what was skipped said."""
    if not request.user.is_staff:
        raise PermissionDenied
    back = f"{request.path}?{request.GET.urlencode()}" if request.GET else request.path
    form = BulkActionForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{field}: {' '.join(str(e) for e in errors)}")
        return redirect(back)
    data = form.cleaned_data
    until = timezone.now() + timedelta(hours=data["hours"] or 24)
    try:
        outcome = findings_act(
            finding_ids=data["ids"],
            user=request.user,
            action=data["action"],
            reason=data["reason"],
            until=until,
        )
    except FindingActionRejected as exc:
        messages.error(request, str(exc))
        return redirect(back)
    done = {
        BulkAction.ACKNOWLEDGE: "acknowledged",
        BulkAction.SILENCE: f"silenced until {timezone.localtime(until):%Y-%m-%d %H:%M %Z}",
        BulkAction.UNACKNOWLEDGE: "no longer acknowledged",
    }[BulkAction(data["action"])]
    if outcome.done:
        messages.success(request, f"{_findings(len(outcome.done))} {done}.")
    if outcome.skipped:
        why = "; ".join(sorted(set(outcome.skipped.values())))
        messages.warning(request, f"{_findings(len(outcome.skipped))} left as they were: {why}")
    return redirect(back)


def _findings(n: int) -> str:
    return f"{n} finding{'' if n == 1 else 's'}"


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
