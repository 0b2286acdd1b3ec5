"""Multi-node questions on a fabric at scale (issue 27): nodes alike stand as one whatever their
leaf, and each is still placed at its own server's place; a question that fits nowhere (its
alternatives planned on the fabric) costs the same number of queries at any fleet size; the
copies a question makes of each twin are the copies `dataclasses.replace` would make."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric.places import Place
from inventory.models import Gpu
from placement.facts import Fleet, node_copy
from placement.planner import Planner, _member_option, chosen_models, plan_request
from placement.selectors import fleet_load, gpu_actions
from placement.service import placement_find
from placement.types import PlacementRequest, Ranking

from .fleets import fresh_fabric_fleet, slurm


def test_a_node_copy_is_the_copy_replace_makes():
    stand_in = slurm("gpu001", 1, used=2)
    copied = node_copy(stand_in, id=7, name="gpu002", server_id=2, twins=[], twin_of=stand_in.id)
    assert copied == replace(
        stand_in, id=7, name="gpu002", server_id=2, twins=[], twin_of=stand_in.id
    )
    assert copied.gpus is stand_in.gpus  # shallow, as replace: twins share their GPU facts
    with pytest.raises(AttributeError):
        node_copy(stand_in, no_such_field=1)


def test_a_member_option_is_its_stand_ins_renamed():
    assert Ranking._fields[-1] == "node"  # `_member_option` rebuilds the rank by position
    stand_in = slurm("gpu001", 1)
    twin = node_copy(stand_in, id=99, name="gpu002", server_id=2, twin_of=stand_in.id)
    planner = Planner(Fleet(nodes=[stand_in], classes={1: {"NV18"}}, pairs={}))
    option = plan_request(planner, PlacementRequest(cluster="hpc", nodes=1, gpus_per_node=8))[
        0
    ].chosen[0]
    member = _member_option(option, twin)
    assert member == replace(option, node=twin, rank=option.rank._replace(node="gpu002"))
    assert chosen_models([option, member]) == chosen_models([option])


def test_twins_on_different_leaves_are_placed_at_their_own_leaves():
    """Eight alike nodes stand as one; the two chosen share a leaf (hops 1), which the stand-in's
    place alone could not tell."""
    ids = itertools.count(1)
    nodes = [slurm(f"gpu{i:03d}", i, id=next(ids)) for i in range(1, 9)]
    stand_in = nodes[0]
    # the stand-in is on a leaf of its own with one free node: the rest are its twins
    stand_in.twins = [(n.id, n.name, n.server_id, n.server_hostname) for n in nodes[1:]]
    leaf_of = {1: "a", 2: "b", 3: "c", 4: "d", 5: "d", 6: "e", 7: "f", 8: "g"}
    places = {s: Place(leaf=leaf, spine="s") for s, leaf in leaf_of.items()}
    fleet = Fleet(nodes=[stand_in], classes={s: {"NV18"} for s in leaf_of}, pairs={}, places=places)
    plan = plan_request(Planner(fleet), PlacementRequest(cluster="hpc", nodes=2, gpus_per_node=8))[
        0
    ]
    assert sorted(o.node.name for o in plan.chosen) == ["gpu004", "gpu005"]
    assert plan.locality.hops == 1 and plan.locality.leaves == 1


@pytest.mark.django_db
def test_alike_nodes_on_many_leaves_stand_as_one_and_the_job_stays_on_one_leaf():
    fresh_fabric_fleet(16, "twin")  # 4 leaves of 4 alike servers
    stand_ins = fleet_load().nodes
    assert [n.weight for n in stand_ins] == [16]  # one node stands for all 16
    with CaptureQueriesContext(connection) as ctx:
        answer = placement_find(cluster="hpc", nodes=2, gpus_per_node=8)
    assert answer.fits and answer.fabric["leaves"] == 1 and answer.fabric["hops"] == 1
    assert not any("fabric_fabriclink" in q["sql"] for q in ctx.captured_queries)


@pytest.mark.django_db
def test_a_question_that_fits_nowhere_costs_the_same_queries_as_the_fleet_grows():
    """Its reason and alternatives (planned on the fabric) included: the count is flat."""
    counts: dict[int, dict[str, int]] = {}
    for servers, prefix in ((4, "small"), (16, "large")):
        fresh_fabric_fleet(servers, prefix)
        asks = {
            "more GPUs a node than any has": {"nodes": 2, "gpus_per_node": 9},
            "more nodes than the fleet has": {"nodes": servers + 1, "gpus_per_node": 8},
        }
        for label, ask in asks.items():
            with CaptureQueriesContext(connection) as ctx:
                answer = placement_find(cluster="hpc", **ask)
            assert not answer.fits and answer.reason, label
            counts.setdefault(servers, {})[label] = len(ctx.captured_queries)
    assert counts[4] == counts[16]


@pytest.mark.django_db
def test_gpu_actions_are_the_fleets_and_found_without_a_scope():
    fresh_fabric_fleet(4, "act")
    gpu = Gpu.objects.order_by("id").first()
    Gpu.objects.filter(pk=gpu.pk).update(status="lost")
    found = gpu_actions()
    assert set(found) == {gpu.pk} and found[gpu.pk][0] == gpu.server_id
