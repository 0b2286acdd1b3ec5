"""Celery tasks of the workloads layer: thin adapters over services, safe to run often."""

from __future__ import annotations

from celery import shared_task

from core.tasks import retry_policy

from .services.holders import event_holders_name

DATABASE_RETRIES = {"acks_late": True, "time_limit": 120, "soft_time_limit": 100, **retry_policy()}


@shared_task(**DATABASE_RETRIES)
def name_event_holders() -> int:
    """Name the workload that held each new health event's GPU (after `record_health`, and
    by beat for events whose job arrived later); an idle pass costs one query."""
    return event_holders_name()
