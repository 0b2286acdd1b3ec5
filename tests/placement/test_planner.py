"""The planner on hand-built fleets: no database (pytest-django refuses any query here)."""

from __future__ import annotations

from typing import Any

from placement.facts import Fleet
from placement.gpu_sets import best_gpu_set
from placement.planner import (
    Option,
    Planner,
    needing_action_words,
    node_free_gpus,
    node_offer,
    nodes_needing_action,
    option_for,
    plan_request,
)
from placement.types import Filters, PlacementRequest, Ranking

from .fleets import gpu, node, nvlink_fleet, slurm


def plan(fleet: Fleet, **request: Any):
    plans = plan_request(Planner(fleet), PlacementRequest(**request))
    return sorted((p for p in plans if p.fits), key=lambda p: p.rank()), plans


# Shapes on a fleet ----------------------------------------------------------------------


def test_slurm_spreads_16_gpus_over_two_full_nodes_of_ten():
    fleet = nvlink_fleet(*(slurm(f"gpu{i:03d}", i + 1) for i in range(10)))
    (best,), _ = plan(fleet, cluster="hpc", gpus=16)
    assert [o.m for o in best.chosen] == [8, 8] and best.total == 16
    assert all(o.gpu_set and o.gpu_set.link_class == "NV18" for o in best.chosen)


def test_spread_takes_the_full_node_first_and_the_tightest_fit_last():
    fleet = nvlink_fleet(
        slurm("gpu000", 1),
        slurm("gpu001", 2),
        slurm("gpu002", 3, used=4, busy_indexes={0, 1, 2, 3}),
    )
    (best,), _ = plan(fleet, cluster="hpc", gpus=12)
    assert [(o.node.name, o.m) for o in best.chosen] == [("gpu000", 8), ("gpu002", 4)]
    assert [g.index for g in best.chosen[1].gpu_set.gpus] == [4, 5, 6, 7]


def test_a_kubernetes_pod_never_spans_nodes():
    fleet = nvlink_fleet(node("dgx-01", 1), node("dgx-02", 2))
    fitting, (only,) = plan(fleet, cluster="prod", gpus=9)
    assert fitting == [] and only.reason.startswith("a Kubernetes pod runs on one node")
    assert {b.reason for b in only.blocked} == {"too_small"}


def test_each_cluster_reads_the_request_its_own_way():
    fleet = nvlink_fleet(node("dgx-01", 1), slurm("gpu000", 2), slurm("gpu001", 3))
    fitting, plans = plan(fleet, gpus=16)
    assert [(p.cluster, p.fits) for p in plans] == [("hpc", True), ("prod", False)]
    assert fitting[0].shape.spread and not plans[1].shape.spread


# One node's offer and ranking -----------------------------------------------------------


def test_unhealthy_gpus_are_not_offered_and_block_a_full_node():
    sick = node("dgx-01", 1, problems={1: "uncorrected_ecc", 2: "reset_pending", 3: "lost"})
    offer = node_offer(sick, Filters())
    assert offer.free == 5 and [g.index for g in offer.gpus] == [0, 4, 5, 6, 7]
    blocked = option_for(offer, 8, nvlink_fleet(sick), Filters())
    assert blocked.reason == "unhealthy_gpu"
    assert blocked.detail == (
        "5 GPU(s) free; unhealthy: 1 lost, 1 page retirement or row remap pending a reset, "
        "1 uncorrected ECC errors"
    )


def test_gpus_needing_action_are_skipped_and_counted_per_node_in_words():
    drain = node(
        "dgx-01",
        1,
        problems={3: "uncorrected_ecc"},
        actions={
            1: "open health finding: Fatal Xid 79",
            2: "open health finding: GPU failing again",
            3: "open health finding: Uncorrected ECC errors",
        },
    )
    offer = node_offer(drain, Filters())
    assert offer.free == 5 and [g.index for g in offer.gpus] == [0, 4, 5, 6, 7]
    blocked = option_for(offer, 7, nvlink_fleet(drain), Filters())
    assert blocked.reason == "unhealthy_gpu" and blocked.gpus_needing_action == 3
    assert blocked.detail == (
        "5 GPU(s) free; unhealthy: 1 uncorrected ECC errors; "
        "need action: 1 open health finding: Fatal Xid 79, "
        "1 open health finding: GPU failing again"
    )
    only_action = node("dgx-02", 2, actions={0: "open health finding: Fatal Xid 79"})
    blocked = option_for(
        node_offer(only_action, Filters()), 8, nvlink_fleet(only_action), Filters()
    )
    assert (blocked.reason, blocked.reason_text) == (
        "needs_action",
        "GPUs needing action (drain, reset or RMA)",
    )
    (row,) = nodes_needing_action([only_action, node("dgx-03", 3)])
    assert (row.node, row.gpus, row.reasons) == (
        "dgx-02",
        1,
        ["1 open health finding: Fatal Xid 79"],
    )
    assert needing_action_words([row]) == (
        "1 GPU(s) on 1 node(s) skipped: they need action (drain, reset or RMA): failing NVML, "
        "an open health finding, or a critical finding on their server"
    )
    assert needing_action_words([]) is None
    assert node_free_gpus(nvlink_fleet(only_action, drain)) == {only_action.id: 7, drain.id: 5}


def test_the_ranking_is_named_and_prefers_the_tightest_known_fit():
    roomy, tight = node("dgx-01", 1), node("dgx-02", 2, used=4)
    tight.busy_indexes = {4, 5, 6, 7}
    unknown = node("dgx-03", 3, used=4)  # the scheduler says 4 are used, not which
    fleet = nvlink_fleet(roomy, tight, unknown)
    options = [option_for(node_offer(n, Filters()), 4, fleet, Filters()) for n in fleet.nodes]
    assert all(isinstance(o, Option) for o in options)
    ranks = {o.node.name: o.rank for o in options}
    assert ranks["dgx-02"] == Ranking(
        link_rank=-18,
        numa_nodes=1,
        leftover=0,
        nic_missing=4,
        in_use_unknown=False,
        cluster="prod",
        node="dgx-02",
    )
    assert ranks["dgx-03"].in_use_unknown and ranks["dgx-01"].leftover == 4
    assert sorted(ranks, key=ranks.get) == ["dgx-02", "dgx-03", "dgx-01"]


def test_pcie_pairs_pick_the_set_under_one_switch():
    pcie = node("pcie-01", 1)
    switch = {0: 0, 1: 0, 2: 1, 3: 1}
    pairs = {
        (100 + a, 100 + b): "PIX" if switch.get(a, a) == switch.get(b, b) else "SYS"
        for a in range(8)
        for b in range(a + 1, 8)
    }
    fleet = Fleet(nodes=[pcie], classes={1: {"PIX", "SYS"}}, pairs={1: pairs})
    (best,), _ = plan(fleet, cluster="prod", gpus=2)
    (option,) = best.chosen
    assert option.gpu_set.link_class == "PIX" and [g.index for g in option.gpu_set.gpus] == [0, 1]
    assert option.rank.link_rank == 1


def test_a_node_without_an_agent_matches_the_model_its_scheduler_names():
    ghost = node("ghost", None, agent=False, products=["h100"])
    assert node_offer(ghost, Filters(model="H100 80GB")).free == 8
    blocked = node_offer(ghost, Filters(model="L40S"))
    assert blocked.reason == "model" and blocked.detail == "GPUs are h100"


def test_a_server_in_two_schedulers_lends_its_gpus_once():
    pod, job = node("dgx-01", 1, used=6), slurm("dgx-01", 1)
    fleet = nvlink_fleet(pod, job)
    assert pod.id != job.id and node_free_gpus(fleet) == {pod.id: 2, job.id: 2}


def test_free_gpus_from_healthy_counts_alone():
    counted = node("dgx-01", 1, agent=False, used=1, healthy_whole=6)
    drained = node("dgx-02", 2, agent=False, healthy_whole=8, schedulable=False)
    assert node_free_gpus(Fleet(nodes=[counted, drained], classes={}, pairs={})) == {counted.id: 6}


# Choosing GPUs in one node --------------------------------------------------------------


def test_best_gpu_set_is_greedy_beyond_the_brute_force_limit():
    gpus = [gpu(i, numa=i // 8) for i in range(16)]

    def pair(a: int, b: int) -> str:
        return "NV12" if a // 4 == b // 4 else ("NODE" if a // 8 == b // 8 else "SYS")

    chosen = best_gpu_set(gpus, 8, pair)  # C(16, 8) = 12,870 subsets: greedy
    assert chosen is not None and chosen.link_class == "NODE"
    assert {g.numa_node for g in chosen.gpus} in ({0}, {1})
    four = best_gpu_set(gpus, 4, pair)
    assert four is not None and four.link_class == "NV12"


def test_best_gpu_set_same_numa_and_nvlink_only_may_find_nothing():
    gpus = [gpu(0, 0), gpu(1, 1)]
    assert best_gpu_set(gpus, 2, lambda a, b: "SYS", same_numa=True) is None
    assert best_gpu_set(gpus, 2, lambda a, b: "SYS", nvlink_only=True) is None
    assert best_gpu_set(gpus, 2, lambda a, b: "NV4", nvlink_only=True).link_class == "NV4"


# One GPU model per job ------------------------------------------------------------------


A100 = "NVIDIA A100-SXM4-80GB"


def _a100(n):
    for g in n.gpus:
        g.name = A100
    return n


def test_a_job_keeps_to_one_gpu_model_where_one_fits():
    fleet = nvlink_fleet(
        slurm("h1", 1),
        slurm("h2", 2, used=4, busy_indexes={0, 1, 2, 3}),
        _a100(slurm("a1", 3)),
        _a100(slurm("a2", 4)),
    )
    (best,), _ = plan(fleet, cluster="hpc", gpus=16)
    assert best.models == [A100] and not best.mixes_models
    assert sorted(o.node.name for o in best.chosen) == ["a1", "a2"]


def test_a_job_only_mixing_holds_does_not_fit_unless_mixing_is_asked():
    fleet = nvlink_fleet(slurm("h1", 1), _a100(slurm("a1", 2)))
    fitting, (unmixed,) = plan(fleet, cluster="hpc", gpus=16)
    assert fitting == [] and "fits only by mixing GPU models" in unmixed.reason
    (best,), _ = plan(fleet, cluster="hpc", gpus=16, mix_models=True)
    assert best.mixes_models and len(best.models) == 2


def test_mix_models_allows_the_mixed_plan():
    fleet = nvlink_fleet(
        slurm("h1", 1), _a100(slurm("a1", 2)), _a100(slurm("a2", 3)), slurm("h2", 4)
    )
    (kept,), _ = plan(fleet, cluster="hpc", gpus=16)
    assert not kept.mixes_models
    (mixed,), _ = plan(fleet, cluster="hpc", gpus=16, mix_models=True)
    assert mixed.total == 16


def test_blocked_reasons_read_as_words():
    from placement.types import REASON_TEXT, reason_text

    assert reason_text("too_small") == "too few free GPUs on one node"
    assert all("_" not in text for text in REASON_TEXT.values())


def test_a_node_with_a_critical_finding_is_ranked_last():
    troubled = slurm("gpu000", 1, critical_findings=1)
    fleet = nvlink_fleet(troubled, slurm("gpu001", 2), slurm("gpu002", 3))
    (best,), _ = plan(fleet, cluster="hpc", gpus=16)
    assert sorted(o.node.name for o in best.chosen) == ["gpu001", "gpu002"]
    (pod,), _ = plan(fleet, cluster="hpc", nodes=1, gpus_per_node=8)
    assert pod.chosen[0].node.name != "gpu000"
    (all3,), _ = plan(fleet, cluster="hpc", gpus=24)
    assert [o.node.name for o in all3.chosen][-1] == "gpu000"
