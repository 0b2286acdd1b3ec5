"""Celery tasks of the health layer: thin adapters over services, safe to run often."""

from __future__ import annotations

from celery import shared_task

from core.tasks import retry_policy

from .services import health_findings_sync, health_prune, health_sweep

DATABASE_RETRIES = {"acks_late": True, "time_limit": 120, "soft_time_limit": 100, **retry_policy()}
"""A lost database connection is retried with backoff (`core.tasks`); anything else is a bug
to see."""


@shared_task(**DATABASE_RETRIES)
def record_health() -> int:
    """Record the events and counters of reports applied since the last run (beat, every few
    seconds; a run that finds nothing new costs three small queries), then raise and resolve
    the findings they change."""
    done = health_sweep()
    if done:
        health_findings_sync()
    return done


@shared_task(**DATABASE_RETRIES)
def sync_health_findings() -> tuple[int, int, int]:
    """Re-judge the health findings on a clock: a window that passes (a repeat offender
    quiet for a day) resolves a finding with no new report."""
    return health_findings_sync()


@shared_task(acks_late=True, time_limit=600, soft_time_limit=570)
def prune_health() -> dict[str, int]:
    return health_prune()
