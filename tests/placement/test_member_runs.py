"""The members of nodes standing for their twins, ranked (`Planner._option_members`): runs of
nodes ranked alike interleave by name, runs never mix, a node's twins in any order."""

from __future__ import annotations

from placement.planner import Planner, plan_request
from placement.types import PlacementRequest

from .fleets import nvlink_fleet, slurm


def twin(name: str, server: int) -> tuple[int, str, int, str]:
    return (1000 + server, name, server, name)


def test_alike_nodes_interleave_by_name_and_the_less_free_come_after():
    first = slurm("n02", 2, twins=[twin("n07", 7), twin("n01", 1)])  # twins out of order
    second = slurm("n03", 3, twins=[twin("n05", 5)])
    busy = slurm("n00", 9, used=4, busy_indexes={0, 1, 2, 3}, twins=[twin("n04", 4)])
    fleet = nvlink_fleet(first, second, busy)
    fleet.classes.update({s: {"NV18"} for s in (1, 4, 5, 7)})
    plan = plan_request(Planner(fleet), PlacementRequest(cluster="hpc", nodes=7, gpus_per_node=4))[
        0
    ]
    assert plan.fits
    # the tightest fit first (no GPU left over), by name; then the free ones, by name
    assert [o.node.name for o in plan.chosen] == ["n00", "n04", "n01", "n02", "n03", "n05", "n07"]
