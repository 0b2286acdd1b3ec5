"""The per-leaf summaries in the database: a multi-node question reads them and never a
cable, in the same number of queries at any fleet size; the summaries follow the fabric
(a cable moved), and the answers never depend on whether they are fresh."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Node
from fabric.services import fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from inventory.models import Gpu, Server
from placement.leaf_summaries import leaf_summaries_refresh
from placement.models import LeafPlacement
from placement.selectors import held_gpus
from placement.service import placement_find
from placement.tasks import refresh_placement_summaries
from tests.reports import make_report
from tests.workloads.factory import workload

from .fleets import fresh_fabric_fleet, slurm_fleet

pytestmark = pytest.mark.django_db


def fabric_fleet(servers: int, *, per_leaf: int = 4, hosts: str = "gpu{:05d}") -> list[str]:
    built = synthetic_fabric(
        servers=servers, rails=2, servers_per_leaf=per_leaf, spines_per_pod=2, host_format=hosts
    )
    if not Server.objects.filter(hostname=built.servers[0]).exists():
        slurm_fleet(built.servers, reports=[make_report(h) for h in built.servers])
    fabric_snapshot_ingest(fabric_name="f", raw=built.text)
    return built.servers


def question() -> tuple[object, list[str]]:
    with CaptureQueriesContext(connection) as ctx:
        answer = placement_find(cluster="hpc", nodes=2, gpus_per_node=8)
    return answer, [q["sql"] for q in ctx.captured_queries]


def reads_cables(sql: list[str]) -> bool:
    return any("fabric_fabriclink" in q for q in sql)


def test_a_multi_node_question_reads_the_leaf_summaries_and_no_cable():
    fabric_fleet(8)
    stale, sql = question()
    assert reads_cables(sql)  # none built yet: the cables, the same answer
    assert leaf_summaries_refresh() == 2  # two leaf groups of 4 servers, one spine group
    fresh, sql = question()
    assert not reads_cables(sql)
    assert [n.node for n in fresh.nodes] == [n.node for n in stale.nodes]
    assert fresh.fabric == stale.fabric and fresh.fabric["leaves"] == 1
    assert leaf_summaries_refresh() is None  # fresh: nothing rebuilt


def test_the_query_count_is_flat_as_the_fleet_grows():
    counts = []
    for servers, cluster in ((4, "small"), (16, "large")):
        fresh_fabric_fleet(servers, cluster)
        answer, sql = question()
        assert answer.fits and not reads_cables(sql)
        counts.append(len(sql))
    assert counts[0] == counts[1]


def test_a_moved_cable_is_read_at_once_and_summarised_on_the_next_pass():
    names = fabric_fleet(8)
    leaf_summaries_refresh()
    # the servers regrouped: 2 a leaf, so gpu00001 and gpu00003 no longer share one
    moved = synthetic_fabric(servers=8, rails=2, servers_per_leaf=2, spines_per_pod=2)
    fabric_snapshot_ingest(fabric_name="f", raw=moved.text)
    before, sql = question()
    assert reads_cables(sql) and before.fabric["leaves"] == 1  # stale: the cables, not a leaf
    assert sorted(n.node for n in before.nodes) in ([names[0], names[1]], [names[2], names[3]])
    refresh_placement_summaries()
    after, sql = question()
    assert not reads_cables(sql)
    assert [n.node for n in after.nodes] == [n.node for n in before.nodes]
    assert LeafPlacement.objects.exclude(leaf="").count() == 4


def test_gpus_lost_on_a_leaf_send_the_job_to_the_other_leaf():
    names = fabric_fleet(8)
    refresh_placement_summaries()
    first, _ = question()
    assert sorted(n.node for n in first.nodes) == names[:2]
    servers = Server.objects.filter(hostname__in=names[:3])
    Gpu.objects.filter(server__in=servers, index=7).update(status="lost")
    Server.objects.filter(hostname__in=names[:3]).update(last_report_hash="changed")
    moved, sql = question()
    assert not reads_cables(sql)
    assert sorted(n.node for n in moved.nodes) == names[4:6]  # the other leaf: 1 switch
    assert moved.fabric["leaves"] == 1


def test_allocations_move_the_job_and_are_read_grouped_per_node():
    names = fabric_fleet(8)
    refresh_placement_summaries()
    workload("1", {names[0]: list(range(8)), names[1]: [0, 1]}, user="alice")
    workload("2", {names[1]: [2]}, user="bob")
    with CaptureQueriesContext(connection) as ctx:
        held = held_gpus()
    assert [q["sql"].count("GROUP BY") for q in ctx.captured_queries] == [1]
    by_name = {n.name: n.id for n in Node.objects.all()}
    assert held[by_name[names[0]]].indexes == set(range(8))
    assert held[by_name[names[1]]].indexes == {0, 1, 2}
    answer, sql = question()
    assert not reads_cables(sql)
    assert sorted(n.node for n in answer.nodes) == names[2:4]
    full = placement_find(cluster="hpc", nodes=7, gpus_per_node=8)
    assert not full.fits
    filled = {b.node: b.filled_by for b in full.blocked}
    assert filled[names[0]] == ["job 1 of alice, 8 GPUs"]
    assert filled[names[1]] == ["job 1 of alice, 2 GPUs", "job 2 of bob, 1 GPU"]
