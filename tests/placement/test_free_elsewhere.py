"""The other clusters of a request that fits nowhere are read only when it may fit in one of
them (`alternatives.may_fit_elsewhere` over `selectors.free_elsewhere`): pure, then held to
the answers of always reading them."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from placement import service
from placement.alternatives import may_fit_elsewhere
from placement.selectors import free_elsewhere
from placement.types import PlacementRequest
from tests.nodes import k8s_node
from tests.reports import make_report

from .fleets import k8s_fleet, placement_answers, slurm_fleet

PROD = ("prod", "kubernetes")


def ask(**fields) -> PlacementRequest:
    return PlacementRequest(cluster="hpc", **fields)


def test_a_kubernetes_cluster_may_hold_pods_of_no_more_than_its_nodes_free():
    free = {PROD: {8: 3, 4: 5, 0: 2}}
    assert may_fit_elsewhere(ask(nodes=3, gpus_per_node=8), free)
    assert not may_fit_elsewhere(ask(nodes=4, gpus_per_node=8), free)
    assert may_fit_elsewhere(ask(nodes=8, gpus_per_node=4), free)
    assert not may_fit_elsewhere(ask(nodes=2, gpus_per_node=9), free)
    assert not may_fit_elsewhere(ask(gpus=9), free)  # a pod runs on one node
    assert may_fit_elsewhere(ask(gpus=8), free)
    assert not may_fit_elsewhere(ask(gpus=8), {})  # no other cluster


def test_slurm_mig_and_model_requests_are_always_read():
    none_free = {PROD: {0: 10}}
    assert may_fit_elsewhere(ask(gpus=9), {**none_free, ("hpc2", "slurm"): {}})
    assert may_fit_elsewhere(ask(gpus=9, mig_profile="1g.10gb"), none_free)
    assert may_fit_elsewhere(ask(gpus=9, model="H100"), none_free)


def prod_and_hpc() -> None:
    slurm_fleet(["dgx-01", "dgx-02"])
    reports = [make_report(f"k8s-{i:02d}") for i in range(1, 7)]
    nodes = [
        k8s_node(r["host"]["hostname"], system_uuid=r["host"]["system_uuid"], **kw)
        for r, kw in zip(
            reports,
            [{}, {"allocatable": 4}, {"unschedulable": True}, {"ready": False}, {}, {}],
            strict=True,
        )
    ]
    k8s_fleet(reports, nodes=nodes)


@pytest.mark.django_db
def test_free_elsewhere_counts_the_ready_schedulable_nodes_by_their_free_gpus(
    django_assert_num_queries,
):
    prod_and_hpc()
    with django_assert_num_queries(2):
        assert free_elsewhere("hpc") == {PROD: {8: 3, 4: 1, 0: 2}}
    with django_assert_num_queries(1):  # hpc is Slurm: every other cluster is read
        assert free_elsewhere("prod") == {("hpc", "slurm"): {}}


ASKS = [
    {"cluster": "hpc", "nodes": 2, "gpus_per_node": 9},  # prod cannot: not read
    {"cluster": "hpc", "nodes": 4, "gpus_per_node": 8},  # nor here (three nodes of 8 free)
    {"cluster": "hpc", "nodes": 3, "gpus_per_node": 8},  # prod may: read, and offered
    {"cluster": "hpc", "gpus": 24},
    {"cluster": "prod", "gpus": 9},  # hpc is Slurm: read
]


@pytest.mark.django_db
def test_the_answers_are_those_of_reading_every_other_cluster(monkeypatch):
    prod_and_hpc()
    with CaptureQueriesContext(connection) as skipped:
        service.placement_find(**ASKS[0])
    found = placement_answers(ASKS)
    offered = found['{"cluster": "hpc", "nodes": 3, "gpus_per_node": 8}']["alternatives"]
    assert any(a["cluster"] == "prod" for a in offered)
    monkeypatch.setattr(service, "may_fit_elsewhere", lambda request, free: True)
    with CaptureQueriesContext(connection) as read:
        service.placement_find(**ASKS[0])
    assert placement_answers(ASKS) == found
    assert len(skipped.captured_queries) < len(read.captured_queries)
