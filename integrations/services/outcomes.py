"""The report outcome counter: one row per (outcome, HTTP status), incremented in SQL."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import F

from ..choices import ReportOutcome
from ..models import ReportOutcomeCount

_ACCEPTED = {
    ReportOutcome.PENDING,
    ReportOutcome.UNCHANGED,
    ReportOutcome.APPLIED,
}


def report_outcome(*, status_code: int, status: str) -> str:
    """The outcome of one answer: a 2xx's `status` when known, else `accepted`; `rejected`
    for every 4xx/5xx (the code tells which)."""
    if not 200 <= status_code < 300:
        return ReportOutcome.REJECTED
    return status if status in _ACCEPTED else ReportOutcome.ACCEPTED


def report_outcome_count(*, status_code: int, status: str = "") -> None:
    """Add one to the counter of this answer (one UPDATE; an INSERT the first time)."""
    outcome = report_outcome(status_code=status_code, status=status)
    key = {"outcome": outcome, "status_code": status_code}
    if ReportOutcomeCount.objects.filter(**key).update(count=F("count") + 1):
        return
    try:
        with transaction.atomic():
            ReportOutcomeCount.objects.create(**key, count=1)
    except IntegrityError:  # another worker created it first
        ReportOutcomeCount.objects.filter(**key).update(count=F("count") + 1)
