"""Multi-node placement on the fabric: one leaf, then the fewest leaves under one spine group,
then one NVLink domain; the switch hops between the nodes chosen and why, in words. The pure
choice on plain places, the planner on hand-built fleets (no database), then the fabric read."""

from __future__ import annotations

import pytest

from fabric.services import fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from inventory.models import Gpu
from placement.locality import NOWHERE, Place, choose_local, describe, hops_between
from placement.planner import Planner, plan_request
from placement.selectors import fleet_places
from placement.service import placement_find
from placement.types import PlacementRequest
from tests.reports import make_report

from .fleets import node, nvlink_fleet, slurm, slurm_fleet


def leaf(name: str, spine: str | None = "s1", nvlink: str | None = None) -> Place:
    return Place(leaf=name, spine=spine, nvlink=nvlink, leaf_name=name, spine_name=spine or "")


def test_hops_count_the_switches_between_two_servers():
    assert hops_between(leaf("a"), leaf("a")) == 1
    assert hops_between(leaf("a"), leaf("b")) == 3
    assert hops_between(leaf("a", "s1"), leaf("b", "s2")) == 5
    assert hops_between(leaf("a"), NOWHERE) is None
    assert describe([leaf("a"), leaf("b"), leaf("a")]).hops == 3
    assert describe([leaf("a"), NOWHERE]).hops is None


def test_one_leaf_wins_over_the_best_ranked_spread_over_leaves():
    ranked = ["n1", "n2", "n3", "n4"]
    places = {"n1": leaf("a"), "n2": leaf("b"), "n3": leaf("c"), "n4": leaf("b")}
    chosen, found = choose_local(ranked, 2, places.__getitem__)
    assert chosen == ["n2", "n4"]
    assert (found.hops, found.leaves, found.spine_groups) == (1, 1, 1)
    assert found.why == "all 2 nodes under one leaf switch (b): 1 switch between them"


def test_among_leaves_that_fit_the_best_ranked_wins():
    places = {"n1": leaf("a"), "n2": leaf("a"), "n3": leaf("b"), "n4": leaf("b")}
    chosen, _ = choose_local(["n3", "n1", "n4", "n2"], 2, places.__getitem__)
    assert chosen == ["n3", "n4"]


def test_no_leaf_holds_them_so_the_fewest_leaves_under_one_spine_group():
    places = {
        "n1": leaf("a", "s1"),
        "n2": leaf("x", "s2"),
        "n3": leaf("b", "s1"),
        "n4": leaf("y", "s2"),
        "n5": leaf("y", "s2"),
        "n6": leaf("c", "s1"),
    }
    chosen, found = choose_local(list(places), 3, places.__getitem__)
    assert sorted(chosen) == ["n2", "n4", "n5"]  # 2 leaves under s2, not 3 under s1
    assert (found.hops, found.leaves, found.spine_groups) == (3, 2, 1)
    assert found.why.startswith("no leaf has 3 nodes that fit; 2 leaves under one spine group")


def test_then_one_nvlink_domain_then_the_best_ranked():
    places = {
        "n1": leaf("a", "s1", "nvl-1"),
        "n2": leaf("b", "s2", "nvl-2"),
        "n3": leaf("c", "s3", "nvl-1"),
    }
    chosen, found = choose_local(list(places), 2, places.__getitem__)
    assert chosen == ["n1", "n3"] and found.nvlink_domains == 1 and found.hops == 5
    assert "one NVLink domain" in found.why
    unknown, found = choose_local(["n1", "n2"], 2, lambda _: NOWHERE)
    assert unknown == ["n1", "n2"] and found.hops is None
    assert found.why == "the fabric of these nodes is not known: the best ranked"


def test_the_planner_keeps_a_two_node_job_under_one_leaf():
    nodes = [slurm(f"gpu{i:03d}", i + 1) for i in range(4)]
    fleet = nvlink_fleet(*nodes)
    fleet.places = {1: leaf("a"), 2: leaf("b"), 3: leaf("c"), 4: leaf("b")}
    (plan,) = plan_request(
        Planner(fleet), PlacementRequest(cluster="hpc", nodes=2, gpus_per_node=8)
    )
    assert [o.node.name for o in plan.chosen] == ["gpu001", "gpu003"]
    assert plan.locality.hops == 1
    (spread,) = plan_request(Planner(fleet), PlacementRequest(cluster="hpc", gpus=16))
    assert [o.node.name for o in spread.chosen] == ["gpu001", "gpu003"]
    assert spread.locality.why == "all 2 nodes under one leaf switch: 1 switch between them"


def test_a_node_with_a_critical_finding_joins_a_leaf_only_when_needed():
    calm = [node(f"dgx-{i}", i + 1) for i in range(3)]
    calm[1].critical_findings = 1
    fleet = nvlink_fleet(*calm)
    fleet.places = {1: leaf("a"), 2: leaf("a"), 3: leaf("b")}
    (plan,) = plan_request(Planner(fleet), PlacementRequest(cluster="prod", nodes=2, gpus=16))
    assert [o.node.name for o in plan.chosen] == ["dgx-0", "dgx-2"]
    assert plan.locality.hops == 3


def test_without_a_fabric_the_answer_is_the_best_ranked_as_before():
    fleet = nvlink_fleet(*(slurm(f"gpu{i:03d}", i + 1) for i in range(3)))
    (plan,) = plan_request(Planner(fleet), PlacementRequest(cluster="hpc", gpus=16))
    assert [o.node.name for o in plan.chosen] == ["gpu000", "gpu001"]
    assert plan.locality.hops is None


@pytest.mark.django_db
def test_the_answer_says_how_many_switches_separate_the_nodes_of_a_discovered_fabric(
    api, client, user
):
    client.force_login(user)
    built = synthetic_fabric(servers=12, rails=2, servers_per_leaf=4, spines_per_pod=2)
    slurm_fleet(built.servers, reports=[make_report(h) for h in built.servers])
    fabric_snapshot_ingest(fabric_name="f", raw=built.text)
    places = fleet_places()
    assert len(places) == 12 and len({p.leaf for p in places.values()}) == 3
    assert len({p.spine for p in places.values()}) == 1
    Gpu.objects.filter(server__hostname__in=built.servers[:2]).update(
        fabric_cluster_uuid="A1B2", fabric_clique_id=7
    )
    domains = {p.nvlink for p in fleet_places().values()}
    assert domains == {"a1b2/7", None}  # the fabric's rule: one domain, between two hosts

    two = placement_find(cluster="hpc", nodes=2, gpus_per_node=8)
    assert two.fabric["hops"] == 1 and two.fabric["leaves"] == 1
    six = placement_find(cluster="hpc", nodes=6, gpus_per_node=8)
    assert (six.fabric["hops"], six.fabric["leaves"], six.fabric["spine_groups"]) == (3, 2, 1)
    assert "2 leaves under one spine group" in six.fabric["why"]
    body = api.get("/api/v1/placement/", {"cluster": "hpc", "gpus": 16}).json()
    assert body["fabric"]["hops"] == 1 and len(body["nodes"]) == 2
    assert placement_find(cluster="hpc", gpus=8).fabric is None
    page = client.get("/placement/", {"cluster": "hpc", "nodes": 6, "gpus_per_node": 8})
    assert (
        'id="placement-fabric"' in page.content.decode() and "3 switches" in page.content.decode()
    )
