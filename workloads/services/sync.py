"""Pull a cluster's workloads after its nodes: slurmrestd `/jobs`, or the pod list.

Run after the clusters layer's pull succeeds (wired in config/celery.py), so a jobs listing
always meets the node set it names. A failure is recorded on the cluster as its nodes' are,
and the workloads stay as they were.
"""

from __future__ import annotations

import logging

from clusters.choices import ClusterSource
from clusters.kubeconfig import kubeconfig_for_pull
from clusters.models import Cluster
from clusters.services import SnapshotRejected, cluster_sync_failed
from workloads.services.intake import jobs_ingest, jobs_parse, pods_ingest

logger = logging.getLogger(__name__)


def cluster_workloads_sync(*, cluster_id: int) -> str:
    """Pull and apply one pulled cluster's workloads: "skipped", "failed" or "ok"."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None or not cluster.pulls:
        return "skipped"
    try:
        if cluster.source == ClusterSource.SLURMRESTD:
            from clusters.pull.slurmrestd import fetch_jobs

            document = fetch_jobs(
                cluster.slurmrestd_url,
                cluster.slurmrestd_token,
                user=cluster.slurmrestd_user or None,
                version=cluster.slurmrestd_api_version or "auto",
            )
            jobs_ingest(cluster_name=cluster.name, snapshot=jobs_parse(document))
        else:
            from clusters.pull.kubernetes import list_pods

            document = list_pods(
                kubeconfig_path=kubeconfig_for_pull(cluster.kubeconfig_path),
                context=cluster.kube_context or None,
                in_cluster=cluster.source == ClusterSource.IN_CLUSTER,
            )
            pods_ingest(cluster_name=cluster.name, document=document)
    except SnapshotRejected as exc:
        cluster_sync_failed(cluster=cluster, error=RuntimeError(f"workloads: {exc}"))
        return "failed"
    except Exception as exc:  # every failure is recorded on the cluster, workloads kept
        cluster_sync_failed(cluster=cluster, error=exc)
        return "failed"
    return "ok"
