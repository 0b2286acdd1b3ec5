"""Celery tasks of the workloads layer: thin adapters over services, safe to run often."""

from __future__ import annotations

from celery import shared_task

from core.tasks import enqueue_soon, retry_policy

from .services.holders import event_holders_name

LISTING_WINDOW_S = 2.0
DATABASE_RETRIES = {"acks_late": True, "time_limit": 120, "soft_time_limit": 100, **retry_policy()}


def workloads_changed() -> None:
    """An applied listing changed workloads: once it commits, one `after_listing` per
    window (a burst of listings coalesces); config/celery.py wires what reads them."""
    enqueue_soon(after_listing, window_s=LISTING_WINDOW_S)


@shared_task(acks_late=True, time_limit=600, soft_time_limit=560, **retry_policy())
def after_listing() -> str:
    """What follows an applied listing inside this layer: health events recorded before
    their job was listed are named; the placement verdicts follow it (config/celery.py)."""
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
    before their nodes were bound."""
    from workloads.services.apply import allocations_join

    return allocations_join()


@shared_task(**DATABASE_RETRIES)
def name_event_holders() -> int:
    """Name the workload that held each new health event's GPU (after `record_health`, and
    by beat for events whose job arrived later); an idle pass costs one query."""
    return event_holders_name()
