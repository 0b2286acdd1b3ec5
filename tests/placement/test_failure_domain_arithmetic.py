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


# -- a switch's failure on a rail-optimised toy fabric --------------------------------------
# Leaves 1-4 each carry rail k of servers 100 and 101 (400 Gb/s a NIC); server 102 hangs all
# its four NICs on leaf 1. Each leaf has four 400 Gb/s uplinks: three to spine 10, one to
# spine 11 (spine 10 carries 75% of the leaf-to-spine bandwidth).

TOY_TIERS = {1: 1, 2: 1, 3: 1, 4: 1, 10: 2, 11: 2}
TOY_TRUNKS = [(leaf, 10, 400.0) for leaf in (1, 2, 3, 4) for _ in range(3)] + [
    (leaf, 11, 400.0) for leaf in (1, 2, 3, 4)
]
TOY_CABLES = {
    100: [(k, 400.0, k) for k in (1, 2, 3, 4)],
    101: [(k, 400.0, k) for k in (1, 2, 3, 4)],
    102: [(1, 400.0, 1)] * 4,
}
RAIL_LINKS = {g: [(f"mlx5_{n}", "PIX" if n == g else "SYS") for n in range(4)] for g in range(4)}
"""GPU k (by id) with NIC mlx5_k on its PCIe switch, every other NIC across the sockets."""


def test_leaf_k_takes_rail_k_of_every_server_and_all_of_the_one_hung_on_it_alone():
    from placement.failure_domains import fabric_loss_words, leaf_loss

    loss = leaf_loss(TOY_CABLES, 1)
    assert loss.cut == {102}
    assert loss.degraded == {100: (400.0, 1600.0, [1]), 101: (400.0, 1600.0, [1])}
    words = fabric_loss_words("leaf-r1", 1, loss, None)
    assert (
        "takes rail 1 of 2 server(s)" in words
        and "800 Gb/s of network lost (25% of theirs)" in words
    )
    assert "stay up on their other NICs" in words and "1 server(s) have no other fabric" in words
    alone = leaf_loss({102: TOY_CABLES[102]}, 1)
    assert alone.cut == {102} and not alone.degraded
    assert "cut off" in fabric_loss_words("leaf-r1", 1, alone, None)


def test_the_gpu_whose_nic_is_on_the_leaf_loses_it_and_a_gpu_with_an_equal_nic_left_keeps_it():
    from placement.failure_domains import gpus_losing_nic

    fabric = {f"mlx5_{n}" for n in range(4)}
    assert gpus_losing_nic(RAIL_LINKS, fabric, {"mlx5_2"}) == {2: ["mlx5_2"]}
    # GPU 9 sits as far from every NIC: it loses its NIC only when all of them go
    far = {**RAIL_LINKS, 9: [(f"mlx5_{n}", "SYS") for n in range(4)]}
    assert 9 not in gpus_losing_nic(far, fabric, {"mlx5_0", "mlx5_1"})
    assert gpus_losing_nic(far, fabric, fabric)[9] == sorted(fabric)
    # a NIC off the fabric (a management port) is nobody's fabric NIC
    mgmt = {0: [("eno1", "PIX"), ("mlx5_0", "NODE")]}
    assert gpus_losing_nic(mgmt, fabric, {"mlx5_0"}) == {0: ["mlx5_0"]}


def test_a_spine_takes_its_share_of_each_leafs_way_up_and_so_of_each_servers():
    from placement.failure_domains.arithmetic import (
        behind_shares,
        cabled_alike,
        fabric_loss_words,
        server_shares,
        spine_loss,
        uplink_shares,
    )

    shares = uplink_shares(TOY_TRUNKS, TOY_TIERS, 10)
    assert shares == {1: 0.75, 2: 0.75, 3: 0.75, 4: 0.75}
    behind = server_shares(TOY_CABLES, shares)
    assert behind == {100: (1200.0, 1600.0), 101: (1200.0, 1600.0), 102: (1200.0, 1600.0)}
    # servers cabled alike lose alike: the ranking judges one of each group
    assert sorted(cabled_alike(TOY_CABLES).values()) == [[100, 101], [102]]
    assert behind_shares(behind.values()) == {0.75: 3}
    spine = spine_loss(TOY_TRUNKS, TOY_TIERS, 11)
    assert spine.share == 0.25 and spine.gbps_lost == 1600.0
    words = fabric_loss_words(
        "spine-2",
        2,
        None,
        spine,
        behind=behind_shares(
            server_shares(TOY_CABLES, uplink_shares(TOY_TRUNKS, TOY_TIERS, 11)).values()
        ),
    )
    assert words.startswith("spine-2 carries 25% of the leaf-to-spine (bisection) bandwidth")
    assert "3 server(s) lose 25% of theirs beyond their leaf" in words
    assert "no server goes down" in words


def test_a_core_reaches_the_leaves_through_the_spines_it_feeds():
    from placement.failure_domains import uplink_shares

    tiers = {1: 1, 2: 1, 10: 2, 11: 2, 20: 3, 21: 3}
    trunks = [(1, 10, 400.0), (1, 11, 400.0), (2, 11, 400.0)]
    trunks += [(10, 20, 800.0), (11, 20, 400.0), (11, 21, 400.0)]
    # spine 10 goes up through core 20 alone, spine 11 half through it
    assert uplink_shares(trunks, tiers, 20) == {10: 1.0, 11: 0.5, 1: 0.75, 2: 0.5}


def test_job_slots_and_shares_in_words():
    from placement.failure_domains.arithmetic import (
        job_slots,
        per_job_words,
        percent,
        share_range,
    )

    assert job_slots({1: 8, 2: 16, 3: 4}, [1, 2, 3, 1]) == 3  # 4 GPUs hold no 8-GPU slot
    assert (percent(0.125), percent(0.5), percent(0.3333)) == ("12.5%", "50%", "33.3%")
    assert share_range([0.25, 0.25]) == "25%" and share_range([0.5, 0.125]) == "12.5% to 50%"
    assert "3 slot(s) of a multi-node job with 8 GPUs a node lose 25%" in per_job_words(3, [0.25])
    assert per_job_words(0, []).startswith("No slot")
