"""Celery tasks of the workloads layer: thin adapters over services, safe to run often."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from core.tasks import retry_policy

from .services.facts import workload_facts_record
from .services.findings import workload_findings_refresh
from .services.retention import process_facts_prune, workloads_summarise

DATABASE_RETRIES = {"acks_late": True, "time_limit": 120, "soft_time_limit": 100, **retry_policy()}
"""A lost database connection is retried with backoff (`core.tasks`); anything else is a bug
to see."""


@shared_task(**DATABASE_RETRIES)
def record_workload_facts() -> int:
    """Store what the GPUs say of the reports applied since the last run (after each applied
    report, coalesced, and by beat), drop the process facts of servers gone silent, and judge
    the workloads findings again when either changed anything. Returns the servers recorded."""
    done = workload_facts_record()
    pruned = process_facts_prune(now=timezone.now())
    if done or pruned:
        workload_findings_refresh()
    return done


@shared_task(**DATABASE_RETRIES)
def sync_workload_findings() -> tuple[int, int, int]:
    """The workloads findings on a clock: a GPU that needs action, or a server reconciliation
    marks wrong, changes without a report of this layer."""
    return workload_findings_refresh()


@shared_task(acks_late=True, time_limit=600, soft_time_limit=570)
def summarise_workloads() -> int:
    return workloads_summarise(now=timezone.now())
