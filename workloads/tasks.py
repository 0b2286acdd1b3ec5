"""Celery tasks of the workloads layer: thin adapters over services, safe to run often."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from core.tasks import enqueue_soon, retry_policy

from .services.facts import workload_facts_record
from .services.findings import workload_findings_refresh
from .services.holders import event_holders_name
from .services.retention import process_facts_prune, workloads_summarise

LISTING_WINDOW_S = 2.0
DATABASE_RETRIES = {"acks_late": True, "time_limit": 120, "soft_time_limit": 100, **retry_policy()}
"""A lost database connection is retried with backoff (`core.tasks`); anything else is a bug
to see."""


def workloads_changed() -> None:
    """An applied listing changed workloads: once it commits, one `after_listing` per
    window (a burst of listings coalesces); config/celery.py wires what reads them."""
    enqueue_soon(after_listing, window_s=LISTING_WINDOW_S)


@shared_task(acks_late=True, time_limit=600, soft_time_limit=560, **retry_policy())
def after_listing() -> str:
    """What follows an applied listing inside this layer: the workloads findings (the
    processes reported before their job was listed join it first), and health events
    recorded before their job was listed named. The placement verdicts follow on beat's
    clock (a pass reads the whole fleet: too much to run after every listing)."""
    workload_findings_refresh()
    event_holders_name()
    return "ok"


@shared_task(acks_late=True, time_limit=600, soft_time_limit=570)
def sync_cluster_workloads(cluster_id: int) -> str:
    """Pull one cluster's workloads (after its nodes: config/celery.py)."""
    from workloads.services.sync import cluster_workloads_sync

    return cluster_workloads_sync(cluster_id=cluster_id)


@shared_task(acks_late=True, time_limit=300, soft_time_limit=280, **retry_policy())
def join_allocations() -> int:
    """After a reconcile (nodes bound or rebound): join the GPUs of allocations applied
    before their nodes were bound, then judge the workloads findings again."""
    from workloads.services.apply import allocations_join

    joined = allocations_join()
    if joined:  # processes reported before the binding join their workloads now
        workload_findings_refresh()
    return joined


@shared_task(**DATABASE_RETRIES)
def name_event_holders() -> int:
    """Name the workload that held each new health event's GPU (after `record_health`, and
    by beat for events whose job arrived later); an idle pass costs one query."""
    return event_holders_name()


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
    """Ended workloads past the retention window summed, then deleted (daily)."""
    return workloads_summarise(now=timezone.now())
