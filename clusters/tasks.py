"""Celery tasks of the scheduler layer: snapshots, pull sync, reconciliation. Thin over services."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import OperationalError
from django.db.models import Q
from django.utils import timezone

from . import selectors
from .choices import SnapshotStatus
from .models import ClusterSnapshot, ReconcileState
from .reconcile import reconcile_all, reconcile_needed
from .services import cluster_sync, snapshot_apply, snapshot_prune

logger = logging.getLogger(__name__)

# A reconcile request older than this is taken as lost (broker restarted, worker killed).
RECONCILE_REQUEST_TTL_S = 300


def reconcile_soon() -> bool:
    """Enqueue one reconcile, unless one is already waiting in the queue.

    A burst of snapshots (or bindings, or pulls) thus queues at most one reconcile, not one
    each, so reports queued behind them are not kept waiting. The flag is a single UPDATE
    on ReconcileState; the reconcile task clears it as it starts, so a change made while it
    runs queues the next one. Returns True when it enqueued.
    """
    now = timezone.now()
    stale = now - timedelta(seconds=RECONCILE_REQUEST_TTL_S)
    waiting = Q(requested_at__isnull=True) | Q(requested_at__lt=stale)
    claimed = ReconcileState.objects.filter(Q(id=1) & waiting).update(requested_at=now)
    if not claimed:
        _, created = ReconcileState.objects.get_or_create(id=1, defaults={"requested_at": now})
        if not created:
            return False
    try:
        reconcile.apply_async(retry=False)
    except Exception as exc:  # the broker is away: beat's reconcile tick catches up
        ReconcileState.objects.filter(id=1).update(requested_at=None)
        logger.warning("could not enqueue a reconcile (%s)", type(exc).__name__)
        return False
    return True


@shared_task(
    acks_late=True,
    time_limit=900,
    soft_time_limit=840,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=5,
)
def reconcile(force: bool = False) -> str:
    """Reconcile the fleet when the inventory or a node set changed since the last run.

    Many triggers (every snapshot, a beat tick after reports) coalesce: a run that finds
    nothing new returns at once, so it is safe to enqueue often.
    """
    ReconcileState.objects.filter(id=1, requested_at__isnull=False).update(requested_at=None)
    if not force and not reconcile_needed():
        return "unchanged"
    return str(reconcile_all())


@shared_task(
    acks_late=True,
    time_limit=1800,
    soft_time_limit=1740,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=5,
)
def apply_snapshot(snapshot_id: int) -> str:
    """Apply one stored snapshot (posted too large to apply in the request), then reconcile."""
    status = snapshot_apply(snapshot_id=snapshot_id)
    if status == SnapshotStatus.APPLIED:
        reconcile_soon()
    return status


def enqueue_snapshot(snapshot_id: int) -> None:
    """Send to the broker without Celery's connection retries: the sweep covers a failure."""
    apply_snapshot.apply_async((snapshot_id,), retry=False)


@shared_task(acks_late=True, time_limit=3600, soft_time_limit=3540)
def sweep_pending_snapshots(batch: int = 20) -> int:
    """Apply snapshots left pending (the broker was away when they came), oldest first."""
    cutoff = timezone.now() - timedelta(seconds=settings.ATLAS_PENDING_SNAPSHOT_GRACE_S)
    ids = list(
        ClusterSnapshot.objects.filter(status=SnapshotStatus.PENDING, received_at__lte=cutoff)
        .order_by("id")
        .values_list("id", flat=True)[:batch]
    )
    for snapshot_id in ids:
        apply_snapshot.run(snapshot_id)
    snapshot_prune()
    return len(ids)


@shared_task(acks_late=True, time_limit=120, soft_time_limit=100)
def sync_due_clusters() -> int:
    """Enqueue a pull for every pulled cluster whose interval has passed."""
    due = selectors.clusters_due_for_sync(now=timezone.now())
    for cluster_id in due:
        sync_cluster.delay(cluster_id)
    return len(due)


@shared_task(acks_late=True, time_limit=600, soft_time_limit=570)
def sync_cluster(cluster_id: int) -> str:
    """Pull one cluster's nodes (and, for Kubernetes, pods); a failure keeps the last node set."""
    status = cluster_sync(cluster_id=cluster_id)
    if status == "ok":
        reconcile_soon()
    return status
