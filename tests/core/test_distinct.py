"""The filter dropdowns' distinct values (core/db/distinct.py): the values `SELECT DISTINCT`
gives, in one query however many rows hold them, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from clusters.models import Cluster, Node
from clusters.selectors import node_states
from core.db.distinct import distinct_values
from inventory.models import Gpu, Server
from inventory.selectors import bound_cluster_names, gpu_model_names
from tests.conftest import require
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


def test_the_dropdowns_cost_one_query_each(django_assert_num_queries):
    """Each dropdown is one statement (two for the states and flags), never a loop over rows,
    so one fleet size shows it."""
    _fleet(60)
    with django_assert_num_queries(2):
        assert node_states() == ["down", "drain", "idle", "mixed"]
    with django_assert_num_queries(1):
        assert gpu_model_names() == ["NVIDIA A100", "NVIDIA H100"]  # the lost B200s left out
    with django_assert_num_queries(1):
        assert bound_cluster_names() == ["b-cluster"]
    with django_assert_num_queries(1):
        assert gpu_models() == ["NVIDIA A100", "NVIDIA H100"]


def _plans(read) -> list[str]:
    """The PostgreSQL plan of every statement `read()` sends, as EXPLAIN's text."""
    sent: list[tuple[str, object]] = []

    def record(execute, sql, params, many, context):
        sent.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        read()
    plans = []
    with connection.cursor() as cursor:
        for sql, params in sent:
            cursor.execute(f"EXPLAIN {sql}", params)
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    return plans


def _probes(*indexes: str) -> dict[str, int]:
    """Scans of each index so far in this transaction (the statistics collector's own count)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, pg_stat_get_xact_numscans(oid) FROM pg_class WHERE relname = ANY(%s)",
            [list(indexes)],
        )
        return dict(cursor.fetchall())


@pytest.mark.postgres
def test_the_walks_read_the_partial_indexes_alone():
    """The dropdowns' walks on PostgreSQL are index-only scans of the indexes made for them
    (clusters 0012, inventory 0012, workloads 0002): the filter implies each partial index's
    condition and the walk's shape fits it. EXPLAIN shows the walk's first step only (PostgreSQL
    15 prints no subplan under a WorkTable Scan), so the index's scan count proves the rest: one
    probe a value, and one that finds none. Sequential scans are turned off for the plans, as a
    table of a few rows is cheaper to read whole; at 130k nodes the planner picks the index by
    cost (bench/lists.py)."""
    require(connection.vendor == "postgresql", "needs DATABASE_URL=postgres://... (EXPLAIN)")
    _fleet(60)
    indexes = ("node_live_state", "node_live_state_flags", "gpu_present_name")
    indexes += ("workload_gpu_models",)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE clusters_node, inventory_gpu, workloads_workload")
        cursor.execute("SET LOCAL enable_seqscan = off")  # the test's transaction only
    before = _probes(*indexes)
    states, flags = _plans(node_states)
    (names,) = _plans(gpu_model_names)
    (models,) = _plans(gpu_models)
    probes = {index: n - before[index] for index, n in _probes(*indexes).items()}
    assert "Index Only Scan using node_live_state on clusters_node" in states
    assert "Index Only Scan using node_live_state_flags on clusters_node" in flags
    assert "Index Only Scan using gpu_present_name on inventory_gpu" in names
    assert "Index Only Scan using workload_gpu_models on workloads_workload" in models
    for plan in (states, flags, names, models):
        assert "Seq Scan" not in plan and "Sort" not in plan, plan
    assert probes == {
        "node_live_state": 3 + 1,  # down, idle, mixed
        "node_live_state_flags": 1 + 1,  # ["DRAIN"]
        "gpu_present_name": 2 + 1,  # A100, H100
        "workload_gpu_models": 3 + 1,  # three lists, [] among them
    }
