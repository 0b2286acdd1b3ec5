"""Plans that take an avoided node, told without making the members (`Planner.avoiding`):
the same decision, count, GPUs, rank and models as the plan made member by member, and the
alternatives they leave the same as when every try is planned in full."""

from __future__ import annotations

from itertools import combinations

import pytest

from placement.alternatives import placement_alternatives
from placement.planner import Planner, plan_request
from placement.types import PlacementRequest

from .fleets import nvlink_fleet, slurm


def twin(name: str, server: int) -> tuple[int, str, int, str]:
    return (1000 + server, name, server, name)


def fleet():
    """Three nodes standing for seven: two runs ranked alike but for the names (twins out of
    order), one run of the less free."""
    first = slurm("n02", 2, twins=[twin("n07", 7), twin("n01", 1)])
    second = slurm("n03", 3, twins=[twin("n05", 5)])
    busy = slurm("n00", 9, used=4, busy_indexes={0, 1, 2, 3}, twins=[twin("n04", 4)])
    built = nvlink_fleet(first, second, busy)
    built.classes.update({s: {"NV18"} for s in (1, 4, 5, 7)})
    return built


def ids(plan) -> set[int]:
    return {o.node.id for o in plan.chosen}


@pytest.mark.parametrize("count", range(1, 8))
def test_an_avoided_plan_is_told_as_the_full_plan_would_take_the_node(count):
    built = fleet()
    request = PlacementRequest(cluster="hpc", nodes=count, gpus_per_node=4)
    (full,) = plan_request(Planner(built), request)
    assert full.fits and not full.avoided
    every = sorted({i for n in built.nodes for i, *_ in n.identities})
    for size in (1, 2):
        for avoid in map(frozenset, combinations(every, size)):
            (plan,) = plan_request(Planner(built).avoiding(avoid), request)
            assert plan.fits
            assert plan.avoided == bool(ids(full) & avoid), (count, avoid)
            if plan.avoided:
                assert len(plan.chosen) == len(full.chosen)
                assert (plan.total, plan.rank(), plan.models) == (
                    full.total,
                    full.rank(),
                    full.models,
                )
            else:
                assert [o.node.name for o in plan.chosen] == [o.node.name for o in full.chosen]


def test_a_planner_avoiding_nothing_plans_in_full():
    request = PlacementRequest(cluster="hpc", nodes=3, gpus_per_node=4)
    (plan,) = plan_request(Planner(fleet()).avoiding(frozenset()), request)
    assert not plan.avoided and [o.node.name for o in plan.chosen] == ["n00", "n04", "n01"]


def test_the_alternatives_are_those_of_every_try_planned_in_full(monkeypatch):
    built = fleet()
    request = PlacementRequest(cluster="hpc", nodes=5, gpus_per_node=8)  # 4 nodes have 8
    every = sorted({i for n in built.nodes for i, *_ in n.identities})
    told = {
        avoid: placement_alternatives(Planner(built), request, avoid)
        for size in (1, 2)
        for avoid in map(frozenset, combinations(every, size))
    }
    monkeypatch.setattr(Planner, "avoiding", lambda self, avoid: self)
    for avoid, alternatives in told.items():
        assert alternatives == placement_alternatives(Planner(built), request, avoid), avoid
    assert any(told.values()) and not all(told.values())
