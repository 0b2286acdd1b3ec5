"""Failure-domain arithmetic on hand-built fleets and rows: no database."""

from __future__ import annotations

import pytest

from placement.facts import Fleet
from placement.failure_domains import capacity_after, rank_domains, switch_split

from .fleets import node, nvlink_fleet, slurm


def test_capacity_lost_per_cluster_and_partition_with_the_largest_job_before_and_after():
    pods = [node(f"dgx-0{i}", i) for i in (1, 2)]
    busy = node("dgx-03", 3, used=6)
    jobs = [slurm(f"gpu00{i}", 10 + i, partitions=["gpu", "all"]) for i in (1, 2)]
    jobs[1].partitions = ["all"]
    fleet = nvlink_fleet(*pods, busy, *jobs)
    after = capacity_after(fleet, {pods[0].id, jobs[0].id})
    hpc, prod = after["clusters"]
    assert prod == {
        "cluster": "prod",
        "kind": "kubernetes",
        "gpu_capacity": 24,
        "gpu_capacity_lost": 8,
        "nodes_lost": 1,
        "largest_node_free_before": 8,
        "largest_node_free_after": 8,
        "free_gpus_before": 18,
        "free_gpus_after": 10,
        "gpus_needing_action": 0,
        "share_lost": pytest.approx(0.3333),
    }
    assert (hpc["gpu_capacity_lost"], hpc["share_lost"], hpc["free_gpus_after"]) == (8, 0.5, 8)
    partitions = {(p["cluster"], p["partition"]): p for p in after["partitions"]}
    assert partitions[("hpc", "gpu")]["share_lost"] == 1.0
    assert partitions[("hpc", "all")]["share_lost"] == 0.5


def test_unhealthy_gpus_are_not_free_before_or_after():
    sick = node("dgx-01", 1, problems={0: "uncorrected_ecc", 5: "lost"})
    after = capacity_after(nvlink_fleet(sick, node("dgx-02", 2)), {sick.id})
    (prod,) = after["clusters"]
    assert prod["largest_node_free_before"] == 8 and prod["free_gpus_before"] == 14
    assert prod["free_gpus_after"] == 8 and prod["gpu_capacity_lost"] == 8


def test_gpus_needing_action_are_lost_already_and_counted():
    drain = node("dgx-01", 1, actions={2: "gpu_fatal_xid", 3: "gpu_repeated_failure"})
    after = capacity_after(nvlink_fleet(drain, node("dgx-02", 2)), {drain.id})
    (prod,) = after["clusters"]
    assert prod["gpus_needing_action"] == 2
    assert prod["largest_node_free_before"] == 8 and prod["free_gpus_before"] == 14
    assert prod["free_gpus_after"] == 8


def test_nothing_lost_is_a_zero_share_and_an_empty_fleet_has_no_clusters():
    fleet = nvlink_fleet(node("dgx-01", 1))
    assert capacity_after(fleet, set())["clusters"][0]["share_lost"] == 0.0
    assert capacity_after(Fleet(nodes=[], classes={}, pairs={}), {1}) == {
        "clusters": [],
        "partitions": [],
    }


def test_a_switch_cuts_single_homed_servers_and_degrades_dual_homed():
    switches = {1: {"leaf-1"}, 2: {"leaf-1", "leaf-2"}, 3: {"leaf-2"}}
    assert switch_split(switches, "leaf-1") == ({1}, {2})
    assert switch_split(switches, "spine") == (set(), set())


def test_ranking_counts_vms_with_their_host_and_racks_by_gpus():
    servers = [
        {"id": 1, "hostname": "kvm-01", "rack": "r1", "physical_host_id": None},
        {"id": 2, "hostname": "vm-a", "rack": "", "physical_host_id": 1},
        {"id": 3, "hostname": "dgx-01", "rack": "r2", "physical_host_id": None},
        {"id": 4, "hostname": "loose", "rack": "", "physical_host_id": None},
    ]
    counts = {"gpus": {2: 4, 3: 8, 4: 1}, "migs": {2: 7}, "nodes": {2: 1, 3: 1}}
    racks = rank_domains(servers, **counts, by="rack", limit=50)
    assert [(i["name"], i["servers"], i["gpus"]) for i in racks["items"]] == [
        ("r2", 1, 8),
        ("r1", 2, 4),
    ]
    assert racks["unracked_servers"] == 1 and racks["fleet_gpus"] == 13
    assert racks["items"][1]["mig_devices"] == 7
    hosts = rank_domains(servers, **counts, by="server", limit=2)
    assert [(i["name"], i["id"]) for i in hosts["items"]] == [("dgx-01", 3), ("kvm-01", 1)]
    assert hosts["count"] == 3 and hosts["items"][0]["share_of_fleet_gpus"] == 0.6154
