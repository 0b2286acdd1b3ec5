"""The per-leaf summaries as plain facts: grouping servers by leaf and spine group, and
giving every server's place back exactly, so a multi-node answer planned on them is the one
planned on the places read from the cables. No database."""

from __future__ import annotations

from placement.leaves import LeafSummary, leaf_summaries, places_from
from placement.locality import Place
from placement.planner import Planner, plan_request
from placement.types import PlacementRequest

from .fleets import nvlink_fleet, slurm


def at(leaf: str | None, spine: str | None = "spine:1", nvlink: str | None = None) -> Place:
    return Place(
        leaf=leaf,
        spine=spine,
        nvlink=nvlink,
        leaf_name=f"leaf group {leaf}" if leaf else "",
        spine_name=f"spines from {spine}" if spine else "",
    )


PLACES = {
    5: at("1:g1"),
    3: at("1:g1"),
    7: at("1:g2"),
    8: at("1:g2", spine=None),  # a leaf reaching no spine (its uplinks down)
    9: at("1:g3", spine="spine:2", nvlink="nvl/1"),
    11: at(None, spine=None, nvlink="nvl/1"),  # an NVLink domain alone
}
DOMAINS = {9: "nvl/1", 11: "nvl/1"}


def test_servers_are_grouped_by_leaf_and_spine_group_in_id_order():
    assert leaf_summaries(PLACES) == [
        LeafSummary("1:g1", "leaf group 1:g1", "spine:1", "spines from spine:1", (3, 5)),
        LeafSummary("1:g2", "leaf group 1:g2", None, "", (8,)),
        LeafSummary("1:g2", "leaf group 1:g2", "spine:1", "spines from spine:1", (7,)),
        LeafSummary("1:g3", "leaf group 1:g3", "spine:2", "spines from spine:2", (9,)),
    ]


def test_the_places_come_back_exactly_with_the_nvlink_domains():
    assert places_from(leaf_summaries(PLACES), DOMAINS) == PLACES
    assert places_from([], {}) == {}
    assert places_from([], {4: "a/1"}) == {4: Place(nvlink="a/1")}


def test_a_multi_node_answer_on_the_summaries_is_the_one_on_the_cables_places():
    nodes = [slurm(f"gpu{i:03d}", i) for i in (3, 5, 7, 8, 9, 11)]
    wanted = PlacementRequest(cluster="hpc", nodes=2, gpus_per_node=8)
    answers = []
    for places in (PLACES, places_from(leaf_summaries(PLACES), DOMAINS)):
        fleet = nvlink_fleet(*nodes)
        fleet.places = places
        (plan,) = plan_request(Planner(fleet), wanted)
        answers.append(([o.node.name for o in plan.chosen], plan.locality))
    assert answers[0] == answers[1]
    assert answers[0][0] == ["gpu003", "gpu005"] and answers[0][1].hops == 1


def test_the_servers_of_a_leaf_share_one_place_and_are_counted_each():
    from placement.locality import largest_group

    summaries = [
        LeafSummary("f:g1", "leaf group 1", "spine:1", "spines from s1", (1, 2, 3)),
        LeafSummary("f:g2", "leaf group 2", "spine:1", "spines from s1", (4, 5)),
    ]
    places = places_from(summaries, {2: "c/1", 9: "c/1"})
    assert places[1] is places[3] and places[2] is not places[1]
    assert places[2] == Place("f:g1", "spine:1", "c/1", "leaf group 1", "spines from s1")
    assert places[9] == Place(nvlink="c/1")
    assert largest_group(places.values()) == 5  # the spine group; the domain holds 2
    assert largest_group([places[1], places[4], places[9]]) == 2
