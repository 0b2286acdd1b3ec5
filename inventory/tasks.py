"""Celery tasks of the inventory: thin adapters over services, ids in, idempotent."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import OperationalError
from django.utils import timezone

from .broker import BrokerBreaker
from .choices import ReportStatus
from .models import Report
from .services import report_apply, report_prune
from .services.apply import ApplyResult, report_fail
from .signals import report_applied

logger = logging.getLogger(__name__)


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=8,
    time_limit=120,
    soft_time_limit=100,
)
def apply_report(self, report_id: int) -> str:
    """Apply one stored report. A report that breaks the apply is marked failed, not retried."""
    try:
        result = report_apply(report_id=report_id)
    except OperationalError:
        raise
    except Exception as exc:
        logger.exception("report %s could not be applied", report_id)
        report_fail(report_id=report_id, error=f"{type(exc).__name__}: {exc}")
        return ReportStatus.FAILED
    if result.status == ReportStatus.APPLIED:
        # The facts are committed: a receiver failing must not fail the report.
        for receiver, error in report_applied.send_robust(sender=ApplyResult, result=result):
            if isinstance(error, Exception):
                logger.error("after report %s: %s failed: %r", report_id, receiver, error)
    return result.status


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
        apply_report.run(report_id)
    report_prune()
    return len(ids)
