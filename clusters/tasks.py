"""Celery tasks of the scheduler layer: pull sync, reconciliation. Thin over services."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.db import OperationalError
from django.utils import timezone

from .choices import ClusterSource
from .kubeconfig import kubeconfig_for_pull
from .models import Cluster
from .reconcile import reconcile_all, reconcile_needed
from .services import snapshot_ingest_document

logger = logging.getLogger(__name__)


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
    if not force and not reconcile_needed():
        return "unchanged"
    return str(reconcile_all())


@shared_task(acks_late=True, time_limit=120, soft_time_limit=100)
def sync_due_clusters() -> int:
    """Enqueue a pull for every pulled cluster whose interval has passed."""
    now = timezone.now()
    due = [
        c.pk
        for c in Cluster.objects.exclude(source=ClusterSource.PUSH).only(
            "id", "last_sync_at", "sync_interval_s"
        )
        if c.last_sync_at is None or c.last_sync_at + timedelta(seconds=c.sync_interval_s) <= now
    ]
    for cluster_id in due:
        sync_cluster.delay(cluster_id)
    return len(due)


@shared_task(acks_late=True, time_limit=600, soft_time_limit=570)
def sync_cluster(cluster_id: int) -> str:
    """Pull one cluster's nodes (and, for Kubernetes, pods); a failure keeps the last node set."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None or not cluster.pulls:
        return "skipped"
    try:
        for document in pull_documents(cluster):
            snapshot_ingest_document(cluster_name=cluster.name, document=document)
    except Exception as exc:  # every failure is recorded on the cluster, the node set kept
        message = str(exc)[:2000] or type(exc).__name__
        Cluster.objects.filter(pk=cluster.pk).update(
            last_sync_at=timezone.now(), last_error=message
        )
        logger.warning("sync of cluster %s failed: %s", cluster.name, message)
        return "failed"
    reconcile.delay()
    return "ok"


def pull_documents(cluster: Cluster) -> list[dict]:
    """The raw documents a pull yields: nodes first, then pods (Kubernetes)."""
    if cluster.source in (ClusterSource.KUBECONFIG, ClusterSource.IN_CLUSTER):
        from .pull.kubernetes import list_nodes_and_pods

        return list_nodes_and_pods(
            kubeconfig_path=kubeconfig_for_pull(cluster.kubeconfig_path),
            context=cluster.kube_context or None,
            in_cluster=cluster.source == ClusterSource.IN_CLUSTER,
        )
    from .pull.slurmrestd import fetch_nodes

    return [
        fetch_nodes(
            cluster.slurmrestd_url,
            cluster.slurmrestd_token,
            user=cluster.slurmrestd_user or None,
            version=cluster.slurmrestd_api_version or "auto",
        )
    ]
