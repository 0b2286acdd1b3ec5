"""Celery tasks of the inventory: thin adapters over services, ids in, idempotent.

What runs after a report is applied is not decided here (the layers that follow sit above
this one): `config/celery.py` wires it, from what `apply_report` returns.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from core.tasks import RETRIED, retry_policy

from .broker import BrokerBreaker
from .choices import ReportStatus
from .models import Report
from .services import report_apply, report_prune
from .services.apply import report_fail

logger = logging.getLogger(__name__)


@shared_task(
    bind=True,
    acks_late=True,
    **retry_policy(),
    time_limit=120,
    soft_time_limit=100,
)
def apply_report(self, report_id: int) -> dict[str, object]:
    """Apply one stored report. A report that breaks the apply is marked failed, not retried.

    Returns what the follow-ups wired in `config/celery.py` need, in JSON types: `report_id`,
    `status` (a ReportStatus, or "missing"), `server_id`, `created` and `identity_changed`.
    """
    try:
        result = report_apply(report_id=report_id)
    except RETRIED:
        raise
    except Exception as exc:
        logger.exception("report %s could not be applied", report_id)
        report_fail(report_id=report_id, error=f"{type(exc).__name__}: {exc}")
        return {"report_id": report_id, "status": ReportStatus.FAILED}
    return {
        "report_id": result.report_id,
        "status": str(result.status),
        "server_id": result.server_id,
        "created": result.created,
        "identity_changed": result.identity_changed,
    }


broker = BrokerBreaker(settings.ATLAS_BROKER_RETRY_AFTER_S)


def enqueue_report(report_id: int) -> str:
    """Hand a stored report to the broker, or leave it pending for the sweep.

    No Celery connection retries, and no try at all while the broker is known away (see
    `inventory.broker`): the agent's 202 never waits on a broker that is down.
    """

    def send() -> None:
        apply_report.apply_async((report_id,), retry=False)

    if apply_report.app.conf.task_always_eager:  # in-process: nothing to wait for
        send()
        return "sent"
    return broker.publish(send)


@shared_task(acks_late=True, time_limit=600, soft_time_limit=570)
def sweep_pending_reports(batch: int = 2000) -> int:
    """Apply reports left pending (the broker was away when they came), oldest first."""
    cutoff = timezone.now() - timedelta(seconds=settings.ATLAS_PENDING_REPORT_GRACE_S)
    ids = list(
        Report.objects.filter(status=ReportStatus.PENDING, received_at__lte=cutoff)
        .order_by("id")
        .values_list("id", flat=True)[:batch]
    )
    for report_id in ids:
        # Through Celery's tracer, here and now (not enqueued: it may be queued already), so
        # that what follows an applied report (config/celery.py) follows these too.
        outcome = apply_report.apply((report_id,), throw=True)
        if outcome.failed():  # the database is away: beat runs the sweep again
            raise outcome.result
    report_prune()
    return len(ids)
