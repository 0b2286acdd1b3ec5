"""Celery tasks of the workloads layer. Thin over services."""

from __future__ import annotations

from celery import shared_task

from core.tasks import enqueue_soon, retry_policy

LISTING_WINDOW_S = 2.0


def workloads_changed() -> None:
    """An applied listing changed workloads: once it commits, one `after_listing` per
    window (a burst of listings coalesces); config/celery.py wires what reads them."""
    enqueue_soon(after_listing, window_s=LISTING_WINDOW_S)


@shared_task(acks_late=True, time_limit=600, soft_time_limit=560, **retry_policy())
def after_listing() -> str:
    """What follows an applied listing inside this layer (the workload findings); the
    placement verdicts follow it, wired in config/celery.py."""
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
