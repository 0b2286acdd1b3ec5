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
        "prod: 2 NVIDIA driver versions in one cluster (550.54.15 on 2 servers: dgx-01, dgx-02; "
        "535.104.05 on 1 server: dgx-03); jobs may behave differently by node"
    )
    assert found.details == {
        "versions": {"550.54.15": 2, "535.104.05": 1},
        "servers": {"550.54.15": ["dgx-01", "dgx-02"], "535.104.05": ["dgx-03"]},
    }


def test_cuda_skew_has_its_own_subject_and_gpu_less_servers_do_not_count():
    servers = [server(1), server(2, cuda_version="12.2"), server(3, gpus=0, driver_version="1")]
    nodes = [node(i, server_id=i) for i in (1, 2, 3)]
    assert [f.subject for f in driver_skew(fleet(servers, nodes))] == ["cluster:1:cuda"]


def test_versions_are_compared_within_a_cluster_not_across():
    servers = [server(1), server(2, driver_version="535.104.05")]
    nodes = [node(1, server_id=1), node(2, server_id=2, cluster_id=2, cluster="other")]
    assert driver_skew(fleet(servers, nodes)) == []


def test_skew_names_the_first_servers_of_each_version_and_counts_the_rest():
    servers = [server(i, hostname=f"gpu-{20 - i:02d}") for i in range(1, 9)]
    servers.append(server(9, hostname="old-01", driver_version="535.104.05"))
    nodes = [node(i, server_id=i) for i in range(1, 10)]
    found = one(driver_skew(fleet(servers, nodes)))
    assert (
        "550.54.15 on 8 servers: gpu-12, gpu-13, gpu-14, gpu-15, gpu-16 and 3 more; "
        "535.104.05 on 1 server: old-01)" in found.message
    )
    assert found.details["servers"]["550.54.15"] == [
        "gpu-12",
        "gpu-13",
        "gpu-14",
        "gpu-15",
        "gpu-16",
    ]
