"""Placement from the real allocations: where running workloads hold GPUs of a node, its free
set is exactly its GPUs minus theirs (so the best free set is chosen, not any N), and the
nodes an answer passes over name the workloads that fill them."""

from __future__ import annotations

import pytest

from placement.selectors import held_gpus
from placement.service import placement_find
from tests.reports import make_report
from tests.workloads.factory import workload

from .fleets import pcie_report, slurm_fleet

pytestmark = pytest.mark.django_db


def test_the_best_free_pair_is_chosen_around_the_gpus_a_job_holds():
    slurm_fleet(["pcie-01"], reports=[pcie_report("pcie-01", [[0, 1], [2, 3]])])
    before = placement_find(cluster="hpc", gpus=2)
    assert [g.index for g in before.nodes[0].gpus] == [0, 1]
    workload("5679", {"pcie-01": [0, 1]})
    after = placement_find(cluster="hpc", gpus=2)
    assert [g.index for g in after.nodes[0].gpus] == [2, 3]
    assert after.nodes[0].link_class == "PIX" and after.nodes[0].free_gpus == 6
    six = placement_find(cluster="hpc", gpus=6)
    assert [g.index for g in six.nodes[0].gpus] == [2, 3, 4, 5, 6, 7]
    assert not placement_find(cluster="hpc", gpus=7).fits


def test_ended_workloads_hold_nothing():
    slurm_fleet(["dgx-01"])
    workload("1", {"dgx-01": [0, 1, 2, 3]}, ended=5)
    assert held_gpus() == {}
    assert placement_find(cluster="hpc", gpus=8).fits


def test_the_nodes_passed_over_name_the_workloads_that_fill_them(api, client, user):
    slurm_fleet(["dgx-01", "dgx-02", "dgx-03"])
    workload("5679", {"dgx-03": list(range(8))}, user="alice")
    workload("5680", {"dgx-02": [0, 1, 2, 3]}, user="bob")
    workload("5681", {"dgx-02": [4, 5]}, user="carol")
    result = placement_find(cluster="hpc", nodes=3, gpus_per_node=8)
    assert not result.fits
    filled = {b.node: b.filled_by for b in result.blocked}
    assert filled["dgx-03"] == ["job 5679 of alice, 8 GPUs"]
    assert filled["dgx-02"] == ["job 5680 of bob, 4 GPUs", "job 5681 of carol, 2 GPUs"]
    body = api.get("/api/v1/placement/", {"cluster": "hpc", "nodes": 3, "gpus_per_node": 8})
    rows = {b["node"]: b for b in body.json()["blocked"]}
    assert rows["dgx-03"]["filled_by"] == ["job 5679 of alice, 8 GPUs"]
    assert rows["dgx-03"]["detail"] == "0 of 8 GPUs free (8 in use)"
    client.force_login(user)
    page = client.get("/placement/", {"cluster": "hpc", "nodes": 3, "gpus_per_node": 8})
    assert "held by job 5679 of alice, 8 GPUs" in page.content.decode()


def test_the_query_count_does_not_grow_with_the_workloads():
    names = [f"dgx-{i:02d}" for i in range(1, 9)]
    slurm_fleet(names, reports=[make_report(n) for n in names])
    workload("1", {"dgx-01": list(range(8))})

    def count() -> int:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as seen:
            placement_find(cluster="hpc", nodes=9, gpus_per_node=8)  # no fit: names holders
        return len(seen.captured_queries)

    few = count()
    for i, name in enumerate(names[1:], start=2):
        workload(str(i), {name: [0, 1, 2, 3]}, user=f"u{i}")
    assert count() == few
