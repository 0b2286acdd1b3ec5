"""One answer on every page (issue 23 §2), on hand-built fleets shaped like the demo's Slurm
cluster: no database (pytest-django refuses any query here).

An alternative never takes a node its answer excluded; a job keeps to one GPU model unless
mixing is asked; a MIG request by compute slices (`1g`) takes one of the fleet's profiles of
those slices, and one the clusters asked cannot hold says where that profile is free.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from placement.alternatives import mig_elsewhere, placement_alternatives
from placement.facts import Fleet, FleetMig, FleetNode
from placement.planner import EXCLUDING, Planner, excluded_nodes, fleet_mig_profiles, plan_request
from placement.types import (
    PlacementRequest,
    PlacementRequestError,
    mig_profile_matches,
    mig_profile_text,
    mig_slices,
)

from .fleets import node, nvlink_fleet, slurm

A100 = "NVIDIA A100-SXM4-80GB"
L40S = "NVIDIA L40S"


def _model(n: FleetNode, name: str) -> FleetNode:
    for g in n.gpus:
        g.name = name
    return n


def demo_slurm() -> Fleet:
    """The demo's Slurm cluster in memory: an H100 half busy, an H100 with a lost GPU (and so a
    critical finding), an A100 half busy, two 4-GPU L40S and a drained one."""
    return nvlink_fleet(
        slurm("dgx-h100-09", 9, used=4, busy_indexes={0, 1, 2, 3}),
        slurm("dgx-h100-10", 10, problems={7: "lost"}, critical_findings=1),
        _model(slurm("dgx-a100-01", 11, used=4, busy_indexes={4, 5, 6, 7}), A100),
        _model(slurm("gpu-l40s-01", 12, gpus=4), L40S),
        _model(slurm("gpu-l40s-02", 13, gpus=4), L40S),
        _model(
            slurm("gpu-l40s-03", 14, gpus=4, schedulable=False, state_flags=["drain"]),
            L40S,
        ),
    )


def answer(fleet: Fleet, **asked: Any):
    """(plans, blocked, alternatives) as the service works them out, on one fleet."""
    request = PlacementRequest(**asked)
    planner = Planner(fleet)
    plans = plan_request(planner, request)
    blocked = [b for p in plans for b in p.blocked]
    alternatives = placement_alternatives(Planner(fleet), request, excluded_nodes(blocked))
    return plans, blocked, alternatives


# An alternative is never a node the answer excluded ------------------------------------


def test_an_alternative_never_takes_the_node_with_the_lost_gpu_the_answer_blocks():
    fleet = demo_slurm()
    (plan,), blocked, alternatives = answer(fleet, cluster="hpc", nodes=1, gpus_per_node=8)
    assert not plan.fits
    assert ("dgx-h100-10", "unhealthy_gpu") in {(b.node, b.reason) for b in blocked}
    assert alternatives
    assert all("dgx-h100-10" not in a.nodes for a in alternatives)
    fewer = [a for a in alternatives if "fewer per node" in a.description]
    assert fewer and fewer[0].gpus_per_node == 4  # 7, 6 and 5 only fit on dgx-h100-10
    # without the rule (and its critical finding) the nearest would be the excluded node
    fleet.nodes[1].critical_findings = 0
    request = PlacementRequest(cluster="hpc", nodes=1, gpus_per_node=8)
    unguarded = placement_alternatives(Planner(fleet), request)
    assert any("dgx-h100-10" in a.nodes for a in unguarded)


def test_drained_and_not_ready_nodes_and_their_twins_are_excluded_whatever_is_asked():
    drained = slurm("gpu-02", 2, schedulable=False, state_flags=["drain"])
    drained.twins = [(902, "gpu-03", 3, "gpu-03")]
    down = slurm("gpu-04", 4, ready=False, state="down")
    busy = slurm("gpu-05", 5, used=6, busy_indexes=set(range(6)))
    blocked = [
        b
        for p in plan_request(
            Planner(nvlink_fleet(drained, down, busy)),
            PlacementRequest(cluster="hpc", nodes=1, gpus_per_node=8),
        )
        for b in p.blocked
    ]
    assert {b.reason for b in blocked} == {"not_schedulable", "not_ready", "in_use"}
    # busy is about this request (two GPUs are free): it may take a smaller one
    assert excluded_nodes(blocked) == {drained.id, 902, down.id}
    assert {"not_ready", "not_schedulable", "unhealthy_gpu", "needs_action"} == EXCLUDING


def test_gpus_needing_action_exclude_their_node_from_the_alternatives():
    fleet = nvlink_fleet(
        slurm("gpu-01", 1, actions={0: "gpu_fatal_xid"}),
        slurm("gpu-02", 2, used=6, busy_indexes=set(range(6))),
    )
    _, blocked, alternatives = answer(fleet, cluster="hpc", nodes=1, gpus_per_node=8)
    assert ("gpu-01", "needs_action") in {(b.node, b.reason) for b in blocked}
    assert alternatives and all(a.nodes == ["gpu-02"] for a in alternatives)


def test_alternatives_keep_off_a_node_with_a_critical_finding_while_another_fits():
    fleet = demo_slurm()
    _, _, alternatives = answer(fleet, cluster="hpc", gpus=16)
    (fewer,) = [a for a in alternatives if "fewer per node" in a.description]
    # 7 would fit only on dgx-h100-10 (its lost GPU is a critical finding): 4 on a calm node
    assert fewer.gpus_per_node == 4 and "dgx-h100-10" not in fewer.nodes
    alone = nvlink_fleet(
        slurm("gpu-01", 1, used=1, busy_indexes={0}, critical_findings=1),
        slurm("gpu-02", 2, used=8, busy_indexes=set(range(8))),
    )
    _, _, (only,) = answer(alone, cluster="hpc", nodes=1, gpus_per_node=8)
    assert only.nodes == ["gpu-01"] and only.gpus_per_node == 7
    assert only.description.endswith("(hpc, slurm; on a node with a critical finding)")


# One GPU model per job ------------------------------------------------------------------


def test_16_gpus_only_three_models_hold_do_not_fit_unless_mixing_is_asked():
    fleet = demo_slurm()
    (plan,), _, alternatives = answer(fleet, cluster="hpc", gpus=16)
    assert not plan.fits and plan.chosen == []
    assert plan.reason.startswith("no one GPU model holds 16 GPUs over as few nodes as possible")
    assert f"(free GPUs: 11 NVIDIA H100 80GB HBM3, 8 {L40S}, 4 {A100})" in plan.reason
    assert "fits only by mixing GPU models" in plan.reason and "slowest GPU's pace" in plan.reason
    assert "1 drained or cordoned" in plan.reason
    mixing = [a for a in alternatives if a.params.get("mix_models")]
    assert [a.description for a in mixing] == ["the same request mixing GPU models (hpc, slurm)"]
    assert mixing[0].total_gpus == 16 and len(mixing[0].nodes) == 4
    (mixed,) = plan_request(
        Planner(fleet), PlacementRequest(cluster="hpc", gpus=16, mix_models=True)
    )
    assert mixed.fits and mixed.mixes_models and len(mixed.models) == 3
    assert [o.node.name for o in mixed.chosen] == mixing[0].nodes


def test_nodes_by_gpus_per_node_keep_to_one_model_too():
    fleet = demo_slurm()
    (plan,), _, _ = answer(fleet, cluster="hpc", nodes=4, gpus_per_node=4)
    assert not plan.fits and "no one GPU model holds 4 node(s) x 4 GPU(s)" in plan.reason
    (two,), _, _ = answer(fleet, cluster="hpc", nodes=2, gpus_per_node=4)
    assert two.fits and len(two.models) == 1  # the two L40S, or the two H100


def test_a_model_asked_that_matches_two_variants_keeps_to_one_of_them():
    fleet = nvlink_fleet(
        _model(slurm("a40", 1), "NVIDIA A100-SXM4-40GB"),
        _model(slurm("a80", 2), A100),
    )
    (plan,), _, _ = answer(fleet, cluster="hpc", gpus=16, model="A100")
    assert not plan.fits and "fits only by mixing" in plan.reason
    (one,), _, _ = answer(fleet, cluster="hpc", gpus=8, model="A100")
    assert one.fits and len(one.models) == 1


# MIG by compute slices, and where a profile is free ------------------------------------


@pytest.mark.parametrize(
    ("asked", "read"),
    [
        ("1g", "1g"),
        ("1G", "1g"),
        ("mig-1g", "1g"),
        ("1c.3g", "1c.3g"),
        ("1g.10gb", "1g.10gb"),
        ("1G.10GB", "1g.10gb"),
        ("nvidia.com/mig-2g.20gb", "2g.20gb"),
    ],
)
def test_a_mig_profile_is_read_in_any_spelling_or_by_its_slices(asked, read):
    assert mig_profile_text(asked) == read


def test_a_mig_profile_that_is_neither_is_a_field_error():
    with pytest.raises(PlacementRequestError) as exc:
        mig_profile_text("huge")
    assert exc.value.field == "mig_profile" and "1g" in str(exc.value)


def test_slices_match_every_profile_of_them_and_no_other():
    assert all(mig_profile_matches("1g", p) for p in ("1g.5gb", "1g.10gb", "1g.20gb", "1G.10GB"))
    assert not any(mig_profile_matches("1g", p) for p in ("11g.5gb", "2g.10gb", "1c.3g.40gb"))
    assert mig_profile_matches("1g.10gb", "1G.10GB") and not mig_profile_matches(
        "1g.10gb", "1g.5gb"
    )
    assert mig_profile_matches("1c.3g", "1c.3g.40gb") and not mig_profile_matches(
        "3g", "1c.3g.40gb"
    )
    assert mig_slices(["1c.3g.40gb", "1g.10gb", "1g.20gb", "2g.20gb", "1g.5gb"]) == [
        "1g",
        "2g",
        "1c.3g",
    ]


def mig_node(name: str, server: int, profiles: dict[str, int], **kw: Any) -> FleetNode:
    """A node whose scheduler offers MIG devices, its server's GPU 0 split into them."""
    built = node(name, server, gpus=1, **kw)
    built.gpus[0].mig = True
    built.gpus[0].name = A100
    built.whole_allocatable = 0
    built.mig_allocatable = dict(profiles)
    built.mig_used = {p: 0 for p in profiles}
    built.migs = [
        FleetMig(f"MIG-{name}-{p}-{i}", built.gpus[0].id, p, None)
        for p, n in profiles.items()
        for i in range(n)
    ]
    return built


def mig_fleet() -> Fleet:
    return nvlink_fleet(
        mig_node("gpu-a07", 7, {"1g.10gb": 7}),
        mig_node("gpu-a08", 8, {"1g.10gb": 5, "2g.20gb": 1}),
        mig_node("gpu-a09", 9, {"1g.20gb": 3}),
        slurm("dgx-01", 1),
        mig_node("mig-01", 21, {"3g.40gb": 2}, cluster="hpc", kind="slurm"),
    )


def test_1g_takes_the_best_of_the_clusters_1g_profiles_one_profile_per_job():
    fleet = mig_fleet()
    assert fleet_mig_profiles(fleet, "1g") == ["1g.10gb", "1g.20gb"]
    assert fleet_mig_profiles(fleet, "1g", "hpc") == []
    (pod,) = plan_request(
        Planner(fleet), PlacementRequest(cluster="prod", gpus=3, mig_profile="1g")
    )
    assert pod.fits and pod.mig_profile == "1g.20gb"  # the tightest fit: all of gpu-a09's
    assert [o.node.name for o in pod.chosen] == ["gpu-a09"]
    (six,) = plan_request(
        Planner(fleet), PlacementRequest(cluster="prod", gpus=6, mig_profile="1g")
    )
    assert six.fits and six.mig_profile == "1g.10gb" and six.chosen[0].node.name == "gpu-a07"
    (eight,) = plan_request(
        Planner(fleet), PlacementRequest(cluster="prod", gpus=8, mig_profile="1g")
    )
    assert not eight.fits and eight.mig_profile == "1g.10gb"  # the most free, said why
    (none,) = plan_request(
        Planner(fleet), PlacementRequest(cluster="hpc", gpus=1, mig_profile="1g")
    )
    assert not none.fits and none.reason.startswith("no MIG 1g profile offered in hpc")


def test_a_mig_profile_the_cluster_asked_lacks_says_where_it_is_free():
    fleet = mig_fleet()
    fleet.nodes[1].mig_used = {"1g.10gb": 2, "2g.20gb": 0}  # gpu-a08: 3 of 5 free
    request = PlacementRequest(cluster="hpc", gpus=2, mig_profile="1g.10gb")
    (found,) = mig_elsewhere(fleet, request, {"hpc"})
    assert (found.cluster, found.kind, found.free) == ("prod", "kubernetes", 10)
    assert found.nodes == ["gpu-a07", "gpu-a08"] and found.profiles == ["1g.10gb"]
    assert found.text == "10 free on Kubernetes cluster prod: gpu-a07, gpu-a08"
    by_slices = mig_elsewhere(fleet, replace(request, mig_profile="1g"), {"hpc"})
    assert by_slices[0].free == 13 and by_slices[0].profiles == ["1g.10gb", "1g.20gb"]
    assert by_slices[0].text.startswith("13 free on Kubernetes cluster prod (1g.10gb, 1g.20gb): ")
    assert mig_elsewhere(fleet, request, {"hpc", "prod"}) == []


def test_mig_elsewhere_names_five_nodes_and_counts_the_rest_twins_included():
    many = mig_node("gpu-b00", 30, {"1g.10gb": 2})
    many.twins = [(900 + i, f"gpu-b{i:02d}", 31 + i, f"gpu-b{i:02d}") for i in range(1, 8)]
    fleet = nvlink_fleet(many, slurm("dgx-01", 1))
    (found,) = mig_elsewhere(fleet, PlacementRequest(mig_profile="1g.10gb"), {"hpc"})
    assert found.free == 16 and len(found.nodes) == 5 and found.more_nodes == 3
    assert found.text.endswith("gpu-b04 and 3 more")
