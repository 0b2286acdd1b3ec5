"""The pull path end to end: a registered cluster, the sync task, the node set, reconciliation.

Slurm: Debian's slurmctld + slurmd + slurmrestd (JWT). Kubernetes: the official client against
a local server replaying a real-shaped NodeList with limit/continue pages.
"""

from __future__ import annotations

import pytest

from clusters.choices import BindingMethod, ClusterKind, ClusterSource
from clusters.models import Cluster, Node
from clusters.reconcile import reconcile_all
from clusters.tasks import sync_cluster, sync_due_clusters
from tests.clusters.test_pull_kubernetes import _kubeconfig, fake_api  # noqa: F401 - fixture
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


@pytest.mark.slurm
def test_slurmrestd_pull_fills_the_node_set_and_binds(slurm_cluster):
    cluster = Cluster.objects.create(
        name="ci",
        kind=ClusterKind.SLURM,
        source=ClusterSource.SLURMRESTD,
        slurmrestd_url=slurm_cluster.restd_url,
        slurmrestd_user=slurm_cluster.user,
        slurmrestd_token=slurm_cluster.token,
        slurmrestd_api_version="auto",
    )
    apply_reports(make_report("gpu-node1", gpus=8))
    assert sync_cluster.run(cluster.pk) == "ok"
    nodes = {n.name: n for n in Node.objects.filter(cluster=cluster)}
    assert sorted(nodes) == slurm_cluster.node_names
    assert {n.gpu_capacity for n in nodes.values()} == {slurm_cluster.gpus_per_node}
    reconcile_all()
    bound = Node.objects.get(cluster=cluster, name="gpu-node1")
    assert bound.server.hostname == "gpu-node1" and bound.binding_method == BindingMethod.HOSTNAME
    cluster.refresh_from_db()
    assert cluster.last_error == "" and cluster.last_success_at is not None


@pytest.mark.slurm
def test_a_failed_pull_records_the_error_keeps_the_nodes_and_hides_the_token(slurm_cluster):
    cluster = Cluster.objects.create(
        name="ci",
        kind=ClusterKind.SLURM,
        source=ClusterSource.SLURMRESTD,
        slurmrestd_url=slurm_cluster.restd_url,
        slurmrestd_user=slurm_cluster.user,
        slurmrestd_token=slurm_cluster.token,
    )
    assert sync_cluster.run(cluster.pk) == "ok"
    bad = "eyJhbGciOiJIUzI1NiJ9.eyJleHAiOjF9.not-the-right-signature"
    Cluster.objects.filter(pk=cluster.pk).update(slurmrestd_token=bad)
    assert sync_cluster.run(cluster.pk) == "failed"
    cluster.refresh_from_db()
    assert cluster.last_error and bad not in cluster.last_error
    assert Node.objects.filter(cluster=cluster, gone_at__isnull=True).count() == len(
        slurm_cluster.node_names
    )


def test_kubernetes_pull_pages_through_nodes_and_pods(fake_api, tmp_path, settings):  # noqa: F811
    settings.ATLAS_KUBECONFIG_DIR = tmp_path
    api, url = fake_api
    cluster = Cluster.objects.create(
        name="lab",
        kind=ClusterKind.KUBERNETES,
        source=ClusterSource.KUBECONFIG,
        kubeconfig_path=_kubeconfig(tmp_path, {"lab": url}, "lab"),
        sync_interval_s=60,
    )
    assert sync_due_clusters.run() == 1  # never synced: due
    cluster.refresh_from_db()
    nodes = Node.objects.filter(cluster=cluster, gone_at__isnull=True)
    assert nodes.count() == len(api.nodes)
    assert cluster.last_snapshot_format and cluster.last_error == ""
    assert any(n.gpu_used for n in nodes)  # the pods' GPU requests landed
    assert sync_due_clusters.run() == 0  # synced a moment ago: not due


def test_kubernetes_pull_failure_keeps_the_last_good_node_set(fake_api, tmp_path, settings):  # noqa: F811
    settings.ATLAS_KUBECONFIG_DIR = tmp_path
    api, url = fake_api
    cluster = Cluster.objects.create(
        name="lab",
        kind=ClusterKind.KUBERNETES,
        source=ClusterSource.KUBECONFIG,
        kubeconfig_path=_kubeconfig(tmp_path, {"lab": url}, "lab"),
    )
    assert sync_cluster.run(cluster.pk) == "ok"
    Cluster.objects.filter(pk=cluster.pk).update(kubeconfig_path=str(tmp_path / "missing"))
    assert sync_cluster.run(cluster.pk) == "failed"
    cluster.refresh_from_db()
    assert "kubeconfig" in cluster.last_error.lower()
    assert Node.objects.filter(cluster=cluster, gone_at__isnull=True).count() == len(api.nodes)
