"""Cluster sync as a service: a failed pull is recorded on the cluster, the node set kept."""

from __future__ import annotations

import pytest

from clusters import services
from clusters.choices import ClusterKind, ClusterSource
from clusters.models import Cluster
from clusters.services import cluster_sync, cluster_sync_failed

pytestmark = pytest.mark.django_db


def _pulled() -> Cluster:
    return Cluster.objects.create(
        name="lab",
        kind=ClusterKind.SLURM,
        source=ClusterSource.SLURMRESTD,
        slurmrestd_url="http://127.0.0.1:1",
    )


def test_a_failed_pull_is_recorded_with_its_message(monkeypatch):
    cluster = _pulled()

    def refuse(cluster):
        raise ConnectionError("slurmrestd refused the connection")

    monkeypatch.setattr(services, "pull_documents", refuse)
    assert cluster_sync(cluster_id=cluster.pk) == "failed"
    cluster.refresh_from_db()
    assert cluster.last_error == "slurmrestd refused the connection"
    assert cluster.last_sync_at is not None


def test_an_error_without_words_is_named_by_its_type_and_cut_to_2000_characters():
    cluster = _pulled()
    assert cluster_sync_failed(cluster=cluster, error=TimeoutError()) == "TimeoutError"
    assert len(cluster_sync_failed(cluster=cluster, error=ValueError("x" * 5000))) == 2000


def test_a_pushed_or_unknown_cluster_is_skipped():
    pushed = Cluster.objects.create(name="push", kind=ClusterKind.KUBERNETES)
    assert cluster_sync(cluster_id=pushed.pk) == "skipped"
    assert cluster_sync(cluster_id=10**9) == "skipped"
