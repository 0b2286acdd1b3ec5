"""Celery tasks of the scheduler layer: snapshots, pull sync, reconciliation. Thin over services."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import IntegrityError
from django.db.models import Q
from django.utils import timezone

from core.tasks import enqueue, retry_policy

from . import selectors
from .choices import SnapshotStatus
from .models import ClusterSnapshot, ReconcileState
from .reconcile import reconcile_all, reconcile_needed, reconcile_servers
from .services import cluster_sync, snapshot_apply, snapshot_prune

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
    if not enqueue(reconcile):  # the broker is away: beat's reconcile tick catches up
        ReconcileState.objects.filter(id=1).update(requested_at=None)
        return False
    return True


# A cluster deleted while the pass writes (after its last look, `_of_live_clusters`) fails
# the pass's commit on a foreign key; the pass rolls back, and the next try no longer sees it.
@shared_task(acks_late=True, time_limit=900, soft_time_limit=840, **retry_policy(IntegrityError))
def reconcile(force: bool = False) -> str:
    """Reconcile the fleet when the inventory or a node set changed since the last run.

    Many triggers (every snapshot, a beat tick after reports) coalesce: a run that finds
    nothing new returns at once, so it is safe to enqueue often. A cluster deleted during a
    pass ends it cleanly: its nodes and findings went with it (`clusters.reconcile`).
    """
    ReconcileState.objects.filter(id=1, requested_at__isnull=False).update(requested_at=None)
    if not force and not reconcile_needed():
        return "unchanged"
    return str(reconcile_all())


@shared_task(acks_late=True, time_limit=120, soft_time_limit=100, **retry_policy())
def reconcile_server(server_id: int, identity_changed: bool = False) -> str:
    """After one server's report: its findings at once (`reconcile_servers`, milliseconds at
    any fleet size), then the full pass requested (coalesced, `reconcile_soon`), which alone
    binds nodes and judges what spans servers.

    A new server or a changed identity can bind or unbind nodes: the full pass alone is
    requested then, as the per-server pass would judge it against bindings about to change.
    """
    if not identity_changed:
        reconcile_servers(server_ids=[server_id])
    reconcile_soon()
    return "reconciled" if not identity_changed else "requested"


@shared_task(acks_late=True, time_limit=1800, soft_time_limit=1740, **retry_policy())
def apply_snapshot(snapshot_id: int) -> str:
    """Apply one stored snapshot (posted too large to apply in the request); applied, it
    requests a reconcile itself (`snapshot_apply`)."""
    return snapshot_apply(snapshot_id=snapshot_id)


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
        enqueue(sync_cluster, cluster_id)
    return len(due)


@shared_task(acks_late=True, time_limit=600, soft_time_limit=570)
def sync_cluster(cluster_id: int) -> str:
    """Pull one cluster's nodes (and, for Kubernetes, pods); a failure keeps the last node set.
    Each snapshot applied requests a reconcile itself (`snapshot_ingest_document`)."""
    return cluster_sync(cluster_id=cluster_id)
