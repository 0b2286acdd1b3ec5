"""A multi-node job on more nodes than any leaf, spine group or NVLink domain holds is close
nowhere: the planner takes the first as ranked and makes members only of the nodes that can be
among them (issue 27: 5,000 nodes of 25,000), the answer the same as when it made them all."""

from __future__ import annotations

import itertools
from dataclasses import replace

from fabric.places import Place
from placement import facts
from placement.facts import Fleet
from placement.locality import largest_group
from placement.planner import CANDIDATE_LIMIT, Option, Planner, _leading, _option_key, plan_request
from placement.types import Filters, PlacementRequest

from .fleets import slurm


def test_the_largest_group_is_the_most_servers_of_one_leaf_spine_group_or_domain():
    places = [
        Place(leaf="a", spine="s"),
        Place(leaf="a", spine="s"),
        Place(leaf="b", spine="s"),
        Place(leaf="c", spine=None, nvlink="n"),
        Place(),
    ]
    assert largest_group(places) == 3  # spine group s
    assert largest_group([Place(leaf="a"), Place(nvlink="n"), Place(nvlink="n")]) == 2
    assert largest_group([Place(), Place()]) == 0
    assert largest_group([]) == 0


def test_the_largest_group_is_worked_out_once_for_the_fleets_of_one_places(monkeypatch):
    """The fleets made from one (`replace`, `of_kind`, a verdict pass's `best_for`) share the
    figure; other places are worked out anew."""
    calls = []
    monkeypatch.setattr(facts, "largest_group", lambda p: calls.append(1) or largest_group(p))
    fleet = Fleet(nodes=[], classes={}, pairs={}, places={1: Place(leaf="a"), 2: Place(leaf="a")})
    made = [fleet, replace(fleet, nodes=[]), fleet.of_kind("slurm"), fleet.with_details({}, {})]
    assert [f.largest_group() for f in made] == [2, 2, 2, 2] and len(calls) == 1
    fleet.places = {1: Place(leaf="a")}
    assert fleet.largest_group() == 1 and len(calls) == 2


def _fleet(groups: list[tuple[int, int]], places: dict[int, Place]) -> Fleet:
    """Stand-ins with their twins: (used GPUs, nodes) each, servers numbered in order."""
    ids = itertools.count(1)
    nodes = []
    for used, size in groups:
        members = [next(ids) for _ in range(size)]
        stand_in = slurm(f"gpu{members[0]:03d}", members[0], id=members[0], used=used)
        stand_in.twins = [(i, f"gpu{i:03d}", i, None) for i in members[1:]]
        nodes.append(stand_in)
    servers = range(1, next(ids))
    return Fleet(nodes=nodes, classes={s: {"NV18"} for s in servers}, pairs={}, places=places)


def _options(planner: Planner, request: PlacementRequest, m: int) -> list[Option]:
    """Each stand-in's option, best first."""
    filters = Filters.of(request)
    found = [planner.option(o, m, filters) for o in planner.offers(filters)]
    assert all(isinstance(o, Option) for o in found)
    return sorted(found, key=_option_key)


def names(options: list[Option]) -> list[str]:
    return [o.node.name for o in options]


def test_the_leading_options_are_those_that_can_fill_the_first_places():
    """The fewest leftover GPUs rank first; two kinds alike but for their names interleave,
    so both lead or neither."""
    planner = Planner(_fleet([(0, 3), (4, 2), (0, 2), (6, 4)], {}))
    ranked = _options(planner, PlacementRequest(cluster="hpc", nodes=2, gpus_per_node=1), 1)
    assert names(ranked) == ["gpu008", "gpu004", "gpu001", "gpu006"]
    assert names(_leading(ranked, 4)) == ["gpu008"]
    assert names(_leading(ranked, 5)) == ["gpu008", "gpu004"]
    assert names(_leading(ranked, 6)) == ["gpu008", "gpu004"]
    assert names(_leading(ranked, 7)) == ["gpu008", "gpu004", "gpu001", "gpu006"]
    assert names(_leading(ranked, 100)) == names(ranked)


def test_a_job_close_nowhere_gets_the_first_as_ranked_as_making_every_member():
    """Leaves of 2 servers, spine groups of 4: 5 nodes share none. The chosen and the
    candidates are the first of every member ranked."""
    groups = [(0, 3), (4, 2), (0, 2), (6, 4), (2, 5)]
    places = {s: Place(leaf=f"l{(s - 1) // 2}", spine=f"s{(s - 1) // 4}") for s in range(1, 17)}
    request = PlacementRequest(cluster="hpc", nodes=5, gpus_per_node=2)
    planner = Planner(_fleet(groups, places))
    assert not planner._may_be_close(5) and planner._may_be_close(4)
    every = planner._option_members(_options(planner, request, 2), None)
    assert len(every) == 16
    plan = plan_request(planner, request)[0]
    assert plan.fits and names(plan.chosen) == names(every[:5])
    assert names(plan.spare[:CANDIDATE_LIMIT]) == names(every[5 : 5 + CANDIDATE_LIMIT])
    assert plan.locality is not None and plan.locality.hops == 5
    # 4 nodes may share a spine group: every member is placed
    near = plan_request(planner, PlacementRequest(cluster="hpc", nodes=4, gpus_per_node=2))[0]
    assert near.fits and near.locality is not None and near.locality.spine_groups == 1
    assert len(near.chosen) + len(near.spare) == 16
