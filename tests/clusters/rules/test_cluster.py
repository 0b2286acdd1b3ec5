"""Cluster rules on hand-built facts: driver and CUDA skew. No database."""

from __future__ import annotations

from clusters.rules.cluster import driver_skew
from findings.choices import FindingType

from .fleets import fleet, node, one, server


def test_two_driver_versions_in_one_cluster():
    servers = [server(1), server(2), server(3, driver_version="535.104.05")]
    nodes = [node(i, server_id=i) for i in (1, 2, 3)]
    found = one(driver_skew(fleet(servers, nodes)))
    assert (found.type, found.subject, found.cluster_id) == (
        FindingType.DRIVER_SKEW,
        "cluster:1:driver",
        1,
    )
    assert found.message == (
        "prod: 2 NVIDIA driver versions in one cluster (550.54.15 on 2 servers, 535.104.05 "
        "on 1 server); jobs may behave differently by node"
    )
    assert found.details == {"versions": {"550.54.15": 2, "535.104.05": 1}}


def test_cuda_skew_has_its_own_subject_and_gpu_less_servers_do_not_count():
    servers = [server(1), server(2, cuda_version="12.2"), server(3, gpus=0, driver_version="1")]
    nodes = [node(i, server_id=i) for i in (1, 2, 3)]
    assert [f.subject for f in driver_skew(fleet(servers, nodes))] == ["cluster:1:cuda"]


def test_versions_are_compared_within_a_cluster_not_across():
    servers = [server(1), server(2, driver_version="535.104.05")]
    nodes = [node(1, server_id=1), node(2, server_id=2, cluster_id=2, cluster="other")]
    assert driver_skew(fleet(servers, nodes)) == []
