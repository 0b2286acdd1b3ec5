"""How well running workloads are placed: judged against the placement answer for their shape
on the fleet as of their start, written to `Workload.locality` and `verdict`; unchanged ones
are skipped. A synthetic fat tree of 12 servers: 3 leaf groups of 4 under one spine group."""

from __future__ import annotations

import pytest

from fabric.services import fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from placement import facts, workload_verdicts
from placement.tasks import judge_workloads as judge_task
from placement.workload_verdicts import judge_workloads
from tests.reports import make_report
from tests.workloads.factory import workload
from workloads.choices import WorkloadState
from workloads.models import Workload

from .fleets import pcie_report, slurm_fleet

pytestmark = pytest.mark.django_db

ALL = list(range(8))


@pytest.fixture
def tree() -> list[str]:
    built = synthetic_fabric(servers=12, rails=2, servers_per_leaf=4, spines_per_pod=2)
    slurm_fleet(built.servers, reports=[make_report(h) for h in built.servers])
    fabric_snapshot_ingest(fabric_name="f", raw=built.text)
    return built.servers  # gpu00001..4 on leaf group 1, 5..8 on 2, 9..12 on 3


def test_a_job_under_one_leaf_is_good_and_says_why(tree):
    job = workload("5679", {tree[0]: ALL, tree[1]: ALL})
    assert judge_workloads().judged == 1
    job.refresh_from_db()
    assert job.verdict == "good"
    assert job.locality["within_node"] == "NV18" and job.locality["switch_hops"] == 1
    assert job.locality["why"].startswith("2 nodes × 8 GPUs under one leaf (leaf group 1)")
    assert "all NVLink within each node" in job.locality["why"]
    assert "2 rails" in job.locality["why"] and "Gb/s per GPU" in job.locality["why"]
    assert job.locality["better"] == [] and job.locality["mixed_models"] == []


def test_a_job_on_two_leaves_while_one_leaf_had_two_free_is_poorly_placed(tree):
    # leaf group 1 is half full before the job starts; the job takes its third node and a node
    # of group 2, where two nodes of one leaf were free (its own first node and the fourth)
    workload("100", {tree[0]: ALL, tree[1]: ALL}, started=0)
    job = workload("5679", {tree[2]: ALL, tree[4]: ALL}, started=10)
    judge_workloads()
    job.refresh_from_db()
    assert job.verdict == "poorly_placed"
    assert job.locality["switch_hops"] == 3
    better = job.locality["better"]
    groups = [set(tree[0:4]), set(tree[4:8]), set(tree[8:12])]
    assert len(better) == 2 and any(set(better) <= g for g in groups)  # under one leaf
    assert f"at its start {', '.join(better)} were free" in job.locality["why"]
    assert Workload.objects.get(scheduler_id="100").verdict == "good"


def test_a_job_wider_than_one_leaf_when_no_leaf_had_room_is_spread(tree):
    # at its start every leaf group has one node free only: 5 and 9 are free too late
    workload("a", {tree[i]: ALL for i in (0, 1, 2)}, started=0)
    workload("b", {tree[i]: ALL for i in (5, 6, 7)}, started=0)
    workload("c", {tree[i]: ALL for i in (8, 9, 10)}, started=0)
    job = workload("5679", {tree[3]: ALL, tree[4]: ALL}, started=5)
    judge_workloads()
    job.refresh_from_db()
    assert job.verdict == "spread", job.locality["why"]
    assert "no closer set" in job.locality["why"]


def test_an_ended_workload_frees_its_gpus_for_the_fleet_as_of_later_starts(tree):
    workload("old", {tree[4]: ALL, tree[5]: ALL}, started=0, ended=5)
    job = workload("5679", {tree[0]: ALL, tree[8]: ALL}, started=10)
    judge_workloads()
    job.refresh_from_db()
    assert job.verdict == "poorly_placed"  # 4 leaf-group-1 nodes were free, and 5-12 too


def test_a_workload_mixing_gpu_models_is_named(tree):
    job = workload("5679", {tree[0]: [0, 1], tree[1]: [0, 1]})
    job.allocations.filter(node_name=tree[1]).update(gpu_type="NVIDIA H200", gpu=None)
    judge_workloads()
    job.refresh_from_db()
    assert job.locality["mixed_models"] == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    assert "mixes GPU models" in job.locality["why"]


def test_unchanged_workloads_are_not_judged_again(tree, django_assert_num_queries):
    job = workload("5679", {tree[0]: ALL, tree[1]: ALL})
    assert judge_task() == 1
    with django_assert_num_queries(2):  # the running workloads, their allocations
        assert judge_workloads().judged == 0
    job.allocations.filter(index=7).delete()
    assert judge_workloads().judged == 1
    assert judge_workloads(force=True).judged == 1


def test_without_a_fabric_a_multi_node_job_is_unknown():
    names = ["gpu-a", "gpu-b"]
    slurm_fleet(names)
    job = workload("5679", {"gpu-a": ALL, "gpu-b": ALL})
    single = workload("5680", {"gpu-a": [0, 1]})  # overlaps: the factory does not check
    judge_workloads()
    job.refresh_from_db()
    single.refresh_from_db()
    assert job.verdict == "unknown" and job.locality["switch_hops"] is None
    assert single.verdict == "good" and single.locality["switch_hops"] == 0


def test_a_pass_reads_the_fleet_once_however_many_workloads_it_judges(tree):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def judged_with_queries() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as seen:
            judged = judge_workloads(force=True).judged
        return judged, len(seen.captured_queries)

    workload("1", {tree[0]: ALL, tree[1]: ALL})
    one, queries = judged_with_queries()
    for i, (a, b) in enumerate([(2, 3), (4, 5), (6, 8)], start=2):
        workload(str(i), {tree[a]: ALL, tree[b]: ALL}, started=i)
    many, more_queries = judged_with_queries()
    assert (one, many) == (1, 4)
    assert more_queries == queries


def test_a_pair_across_sockets_while_a_pcie_switch_pair_was_free_is_poorly_placed():
    slurm_fleet(["pcie-01"], reports=[pcie_report("pcie-01", [[0, 1], [2, 3]])])
    workload("1", {"pcie-01": [2, 3]}, started=0)
    job = workload("5679", {"pcie-01": [1, 4]}, started=5)
    judge_workloads()
    job.refresh_from_db()
    assert (job.verdict, job.locality["within_node"], job.locality["switch_hops"]) == (
        "poorly_placed",
        "SYS",
        0,
    )
    assert job.locality["better"] == ["pcie-01"]
    assert "pcie-01 had GPUs 0, 1 free through one PCIe switch" in job.locality["why"]
    assert Workload.objects.get(scheduler_id="1").verdict == "good"


def test_a_pass_costs_as_many_queries_judging_2_workloads_as_12_and_its_memo_changes_no_verdict(
    tree, monkeypatch
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def judged_with_queries() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as seen:
            judged = judge_workloads(force=True).judged
        return judged, len(seen.captured_queries)

    def verdicts() -> dict[str, tuple[str, dict]]:
        running = Workload.objects.filter(state=WorkloadState.RUNNING)
        return {w.scheduler_id: (w.verdict, w.locality) for w in running}

    # two leaves each: the planner is asked for every one of them
    workload("1", {tree[0]: [0, 1], tree[4]: [0, 1]}, started=1)
    workload("2", {tree[1]: [0, 1, 2, 3]}, started=2)
    two = judged_with_queries()
    for i in range(3, 13):
        a, b = (i % 4, 4 + i % 4) if i % 2 else (8 + i % 4, i % 4)
        first = [2, 3] if i < 8 else [4, 5]
        workload(
            str(i), {tree[a]: first, tree[b]: first}, started=i, ended=20 + i if i > 10 else None
        )
    twelve = judged_with_queries()
    assert (two[0], twelve[0]) == (2, 10)  # two of the twelve ended: not running
    assert twelve[1] == two[1]
    memoised = verdicts()
    # each on two leaves while a leaf had two nodes with its GPUs free, but 2 on one node
    poorly = {str(i): "poorly_placed" for i in (1, *range(3, 11))}
    assert {k: verdict for k, (verdict, _) in memoised.items()} == {**poorly, "2": "good"}
    # the same pass with a planner of its own for each workload, no memo: the same verdicts
    plain = workload_verdicts.best_for
    monkeypatch.setattr(workload_verdicts, "best_for", lambda *args: plain(*args[:5]))
    assert judge_workloads(force=True).judged == 10
    assert verdicts() == memoised


def test_a_pass_works_out_the_largest_group_of_the_fabric_once(tree, monkeypatch):
    calls = []
    real = facts.largest_group
    monkeypatch.setattr(facts, "largest_group", lambda places: calls.append(1) or real(places))
    workload("1", {tree[0]: ALL, tree[4]: ALL}, started=1)  # two leaves each: both planned
    workload("2", {tree[1]: ALL, tree[8]: ALL}, started=2)
    assert judge_workloads().judged == 2
    assert len(calls) == 1
