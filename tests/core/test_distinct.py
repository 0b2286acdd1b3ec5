"""The filter dropdowns' distinct values (core/db/distinct.py): the values `SELECT DISTINCT`
gives, in one query however many rows hold them, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import pytest
from django.utils import timezone

from clusters.models import Cluster, Node
from clusters.selectors import node_states
from core.db.distinct import distinct_values
from inventory.models import Gpu, Server
from inventory.selectors import bound_cluster_names, gpu_model_names
from workloads.models import Workload
from workloads.selectors import gpu_models

pytestmark = pytest.mark.django_db


def _fleet(servers: int) -> None:
    """`servers` servers of 2 GPUs (one lost), each with a node in one of two clusters (only
    the first bound), nodes in three states, some flagged, some gone; a workload a server."""
    now = timezone.now()
    clusters = [Cluster.objects.create(name=n, kind="slurm") for n in ("b-cluster", "a-cluster")]
    rows = Server.objects.bulk_create(
        Server(identity=f"hostname:s{i:03d}", hostname=f"s{i:03d}") for i in range(servers)
    )
    Gpu.objects.bulk_create(
        Gpu(
            server=s,
            index=g,
            uuid=f"GPU-{s.pk}-{g}",
            name=("NVIDIA H100", "NVIDIA A100")[i % 2] if g == 0 else "NVIDIA B200",
            status="lost" if g else "ok",
        )
        for i, s in enumerate(rows)
        for g in range(2)
    )
    Node.objects.bulk_create(
        Node(
            cluster=clusters[i % 2],
            name=f"n{i:03d}",
            kind="slurm",
            state=("idle", "mixed", "down")[i % 3],
            state_flags=["DRAIN"] if i % 4 == 1 else [],
            server=s if i % 2 == 0 else None,
            gone_at=now if i % 5 == 4 else None,
        )
        for i, s in enumerate(rows)
    )
    Workload.objects.bulk_create(
        Workload(
            cluster=clusters[0],
            kind="slurm_job",
            scheduler_id=str(i),
            state="running",
            gpu_models=[["NVIDIA H100"], ["NVIDIA A100", "NVIDIA H100"], []][i % 3],
        )
        for i in range(servers)
    )


@pytest.mark.parametrize("size", [6, 60])
def test_the_walk_finds_what_select_distinct_finds(size):
    _fleet(size)
    live = Node.objects.filter(gone_at__isnull=True)
    expected = sorted(set(live.values_list("state", flat=True)))
    assert distinct_values(live, "state") == expected
    flags = distinct_values(live.exclude(state_flags=[]), "state_flags")
    assert flags == [["DRAIN"]]
    assert distinct_values(Node.objects.none(), "state") == []
    assert distinct_values(Node.objects.filter(state="nowhere"), "state") == []


def test_the_walk_refuses_a_filter_that_joins():
    with pytest.raises(ValueError):
        distinct_values(Node.objects.filter(cluster__name="x"), "state")


def test_the_walk_takes_a_relation_read_from_its_own_column():
    """`server__isnull=False` names the server table, but Django reads the node's own
    `server_id` and trims the join: one table still, so the walk runs."""
    _fleet(6)
    bound = Node.objects.filter(server__isnull=False)
    expected = sorted(set(bound.values_list("state", flat=True)))
    assert distinct_values(bound, "state") == expected == ["down", "idle", "mixed"]


@pytest.mark.parametrize("size", [6, 60])
def test_the_dropdowns_cost_one_query_each_at_any_fleet_size(size, django_assert_num_queries):
    _fleet(size)
    with django_assert_num_queries(2):
        assert node_states() == ["down", "drain", "idle", "mixed"]
    with django_assert_num_queries(1):
        assert gpu_model_names() == ["NVIDIA A100", "NVIDIA H100"]  # the lost B200s left out
    with django_assert_num_queries(1):
        assert bound_cluster_names() == ["b-cluster"]
    with django_assert_num_queries(1):
        assert gpu_models() == ["NVIDIA A100", "NVIDIA H100"]
