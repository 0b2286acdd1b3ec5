"""``kubectl describe node`` with MIG resources (issue 21, item 4): kept as the NodeList
path keeps them, by the one rule (`kubernetes.mig_counts`), with what pods request of them
from "Allocated resources"."""

from __future__ import annotations

import pytest

from clusters.models import Node
from clusters.parsers import parse_snapshot
from clusters.parsers.kubernetes import mig_counts
from clusters.services import snapshot_ingest
from tests.fixtures.scheduler import fixture_text
from tests.nodes import k8s_node, k8s_node_list

DESCRIBE = "k8s-kubectl-describe-nodes-mig-mixed.txt"
MIG = {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-3g.40gb": 2}


def _listed(name: str):
    node = k8s_node(
        name,
        gpus=0,
        extra_resources=MIG,
        labels={"nvidia.com/mig.strategy": "mixed", "nvidia.com/mig-1g.10gb.count": "16"},
    )
    return parse_snapshot(k8s_node_list(node)).nodes[0]


def test_mig_counts_is_the_one_rule():
    assert mig_counts({**MIG, "nvidia.com/gpu": 8, "rdma/ib": 1}) == {"1g.10gb": 16, "3g.40gb": 2}


@pytest.mark.parametrize("name", ["dgx-01", "dgx-02"])
def test_describe_keeps_mig_resources_as_the_node_list_does(name):
    described = {n.name: n for n in parse_snapshot(fixture_text(DESCRIBE)).nodes}[name]
    listed = _listed(name)
    assert described.mig_resources == {"1g.10gb": 16, "3g.40gb": 2}
    assert described.resources["nvidia.com/mig-1g.10gb"] == {"capacity": 16, "allocatable": 16}
    same = {k: v for k, v in described.to_dict().items() if k not in ("gpu_used", "mig_used")}
    assert same == {k: listed.to_dict()[k] for k in same}


def test_describe_says_what_pods_request_of_each_mig_profile():
    nodes = {n.name: n for n in parse_snapshot(fixture_text(DESCRIBE)).nodes}
    assert (nodes["dgx-01"].gpu_used, nodes["dgx-01"].mig_used) == (0, {"1g.10gb": 3})
    # no "Allocated resources": nothing is claimed, as for a node list
    assert (nodes["dgx-02"].gpu_used, nodes["dgx-02"].mig_used) == (None, None)


@pytest.mark.django_db
def test_mig_figures_of_a_describe_are_stored_and_a_node_list_keeps_them():
    only_first = fixture_text(DESCRIBE).split("Name:               dgx-02")[0]
    snapshot_ingest(cluster_name="k8s", raw=only_first)
    node = Node.objects.get(name="dgx-01")
    assert node.mig_resources == {"1g.10gb": 16, "3g.40gb": 2}
    assert (node.gpu_used, node.mig_used) == (0, {"1g.10gb": 3})

    # a later describe says what pods request now
    snapshot_ingest(
        cluster_name="k8s",
        raw=only_first.replace("mig-1g.10gb  3         3", "mig-1g.10gb  5         5"),
    )
    assert Node.objects.get(name="dgx-01").mig_used == {"1g.10gb": 5}

    # a node list says nothing of use: what the describe said stays
    node_list = k8s_node_list(k8s_node("dgx-01", gpus=0, extra_resources=MIG))
    snapshot_ingest(cluster_name="k8s", raw=node_list)
    node = Node.objects.get(name="dgx-01")
    assert node.mig_used == {"1g.10gb": 5} and node.mig_resources == {"1g.10gb": 16, "3g.40gb": 2}
