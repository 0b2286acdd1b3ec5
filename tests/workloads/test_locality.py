"""A workload's locality from plain facts (no database): the worst link within each node, NICs
at PIX, the switch hops between its nodes (the fabric's rule: one leaf 1, a spine group 3),
rails, bandwidth per GPU and mixed models; and the verdict against the best the fleet had."""

from __future__ import annotations

from fabric.places import Place
from placement.workload_verdicts import Best, verdict_of
from workloads.locality import HeldNode, locality_record, workload_spread

H100 = "NVIDIA H100 80GB HBM3"


def nvlink(a: int, b: int) -> str:
    return "NV18"


def two_sockets(a: int, b: int) -> str:
    """PIX in pairs, NODE within a socket (0-3, 4-7), SYS across."""
    if a // 2 == b // 2:
        return "PIX"
    return "NODE" if (a < 4) == (b < 4) else "SYS"


def leaf(name: str, spine: str = "s1") -> Place:
    return Place(leaf=name, spine=spine, leaf_name=name)


def held(name: str, gpus: range | list[int], **kw) -> HeldNode:
    kw.setdefault("pair_class", nvlink)
    kw.setdefault("models", (H100,))
    return HeldNode(name=name, gpus=tuple(gpus), **kw)


def test_one_nvlink_node_is_all_nvlink_and_zero_hops():
    spread = workload_spread([held("dgx-01", range(8), nic_at_pix=frozenset(range(8)))])
    assert (spread.within_node, spread.switch_hops, spread.nic_missing) == ("NV18", 0, 0)
    record = locality_record(spread, [8], verdict="good")
    assert record["why"] == "1 node × 8 GPUs, all NVLink within the node"
    assert record["within_node"] == "NV18" and record["switch_hops"] == 0


def test_gpus_across_sockets_are_bound_by_sys_and_nics_missing_are_counted():
    node = held("pcie-01", [0, 1, 4, 5], pair_class=two_sockets, nic_at_pix=frozenset({0, 1}))
    spread = workload_spread([node])
    assert spread.within_node == "SYS" and spread.nic_missing == 2
    why = locality_record(spread, [4], verdict="good")["why"]
    assert "across sockets within the node" in why and "2 GPU(s) without a NIC at PIX" in why
    pair = workload_spread([held("pcie-01", [0, 1], pair_class=two_sockets)])
    assert pair.within_node == "PIX"


def test_one_gpu_has_no_link_within_its_node():
    spread = workload_spread([held("dgx-01", [3])])
    assert spread.within_node is None and spread.within_known
    assert locality_record(spread, [1], verdict="good")["within_node"] is None


def test_two_nodes_under_one_leaf_are_one_switch_apart_with_rails_and_bandwidth():
    nodes = [
        held(
            f"dgx-0{i}",
            range(8),
            place=leaf("leaf-03"),
            nic_gbps=3200.0,
            rails=frozenset({1, 2, 3, 4}),
        )
        for i in (1, 2)
    ]
    spread = workload_spread(nodes)
    assert (spread.switch_hops, spread.rails, spread.gbps_per_gpu) == (1, (1, 2, 3, 4), 400.0)
    assert locality_record(spread, [8, 8], verdict="good")["why"] == (
        "2 nodes × 8 GPUs under one leaf (leaf-03), all NVLink within each node, 4 rails, "
        "400 Gb/s per GPU"
    )
    across = workload_spread(
        [held("a", range(8), place=leaf("l1")), held("b", range(8), place=leaf("l2"))]
    )
    assert across.switch_hops == 3
    beyond = workload_spread(
        [held("a", range(8), place=leaf("l1", "s1")), held("b", range(8), place=leaf("l2", "s2"))]
    )
    assert beyond.switch_hops == 5
    assert (
        workload_spread([held("a", range(8), place=leaf("l1")), held("b", range(8))]).switch_hops
        is None
    )


def test_mixed_models_are_named():
    spread = workload_spread([held("a", [0, 1]), held("b", [0, 1], models=("NVIDIA H200",))])
    record = locality_record(spread, [2, 2], verdict="good")
    assert record["mixed_models"] == [H100, "NVIDIA H200"]
    assert "mixes GPU models: NVIDIA H100 80GB HBM3, NVIDIA H200" in record["why"]


def test_the_verdict_names_a_closer_set_free_at_the_start():
    wide = workload_spread(
        [held("a", range(8), place=leaf("l1")), held("b", range(8), place=leaf("l2"))]
    )
    closer = Best(
        ("c", "d"), 1, -18, "all 2 nodes under one leaf switch (l3): 1 switch between them"
    )
    verdict, why, better = verdict_of(wide, closer)
    assert (verdict, better) == ("poorly_placed", ["c", "d"])
    assert why.startswith("at its start c, d were free: all 2 nodes under one leaf switch (l3)")
    assert verdict_of(wide, Best(("a", "b"), 3, -18, ""))[0] == "spread"
    assert verdict_of(wide, None)[0] == "spread"
    near = workload_spread(
        [held("a", range(8), place=leaf("l1")), held("b", range(8), place=leaf("l1"))]
    )
    assert verdict_of(near, Best(("a", "b"), 1, -18, ""))[0] == "good"


def test_the_verdict_names_a_better_wired_set_on_one_node():
    sockets = workload_spread([held("p", [0, 1, 4, 5], pair_class=two_sockets)])
    one_socket = Best(("p",), 0, 1, "p had 4 GPUs free through one PCIe switch")
    assert verdict_of(sockets, one_socket)[0] == "poorly_placed"
    unknown = workload_spread([held("p", [0, 1], pair_class=lambda a, b: None)])
    assert verdict_of(unknown, None)[0] == "unknown"
