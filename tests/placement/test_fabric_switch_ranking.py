"""The failure-domain ranking adds the discovered fabric's switches: a leaf ranks by the
servers it cuts off (their GPUs and nodes) and else by the rails it takes, nodes still up; a
spine by its share of the bisection. A fixed number of queries; shown on the failure tab."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster, Node
from fabric.models import Fabric, Switch
from fabric.services import fabric_rebind, fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from placement.failure_domains import failure_domain_ranking, spine_loss, spine_losses
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


def on_fabric(name: str, servers: int, rails: int, host_format: str) -> dict:
    built = synthetic_fabric(
        servers=servers, rails=rails, servers_per_leaf=2, spines_per_pod=2, host_format=host_format
    )
    fabric_snapshot_ingest(fabric_name=name, raw=built.text)
    found = apply_reports(*(make_report(host, gpus=8, nics=rails) for host in built.servers))
    fabric_rebind(fabric=Fabric.objects.get(name=name))
    return found


def test_spine_losses_of_every_switch_above_the_leaves_worked_by_hand():
    """Tier 2 carries 2 leaves x 3 spines x 400 + leaf 3's one 200 trunk = 2,600 Gb/s down;
    tier 3 carries 4 x 800 + 800 = 4,000. Leaf 3 hangs off spine 10 alone, spine 12 off
    core 20 alone."""
    tiers = {1: 1, 2: 1, 3: 1, 10: 2, 11: 2, 12: 2, 20: 3, 21: 3}
    trunks = [(leaf, s, 400.0) for leaf in (1, 2) for s in (10, 11, 12)] + [(3, 10, 200.0)]
    trunks += [(s, c, 800.0) for s in (10, 11) for c in (20, 21)] + [(12, 20, 800.0)]
    every = spine_losses(trunks, tiers)
    lost = {switch: (loss.gbps_lost, loss.tier_gbps) for switch, loss in every.items()}
    assert lost == {
        10: (1000.0, 2600.0),
        11: (800.0, 2600.0),
        12: (800.0, 2600.0),
        20: (2400.0, 4000.0),
        21: (1600.0, 4000.0),
    }
    assert every[10].isolated_switches == [3] and every[20].isolated_switches == [12]
    assert every[11].isolated_switches == every[21].isolated_switches == []
    assert every[20].share == pytest.approx(2400 / 4000)
    assert spine_loss(trunks, tiers, 12) == every[12]


def test_a_leaf_that_is_the_only_cable_of_its_servers_ranks_first_with_their_gpus_and_nodes(api):
    single = on_fabric("eth", 4, 1, "s{:05d}")  # one NIC a server: a leaf cuts two off
    on_fabric("ib", 4, 2, "d{:05d}")  # two rails: a leaf takes one, servers stay up
    cluster = Cluster.objects.create(name="hpc", kind="slurm")
    for number, server in enumerate(single.values()):
        Node.objects.create(cluster=cluster, name=f"n{number}", kind="slurm", server=server)
    ranking = api.get("/api/v1/failure-domains/ranking/?by=switch").json()
    first = ranking["items"][0]
    assert first["name"].startswith("eth/leaf-") and first["tier"] == 1
    assert (first["servers"], first["gpus"]) == (2, 16) and first["servers_degraded"] == 0
    assert first["nodes"] >= 2 and first["share_of_fleet_gpus"] == pytest.approx(16 / 64)
    assert "cut off" in first["message"]
    dual = next(i for i in ranking["items"] if i["name"] == "ib/leaf-su0001-r2")
    assert (dual["servers"], dual["gpus"], dual["servers_degraded"]) == (0, 0, 2)
    assert dual["rails_lost"] == [2] and dual["gbps_lost"] == 800.0
    spines = [i for i in ranking["items"] if i["tier"] == 2 and i["fabric"] == "ib"]
    assert {i["bisection_share_lost"] for i in spines} == {0.5}


def test_the_switch_ranking_costs_the_same_queries_for_a_small_and_a_large_fabric():
    def cost() -> int:
        with CaptureQueriesContext(connection) as captured:
            failure_domain_ranking(by="switch")
        return len(captured)

    on_fabric("a", 4, 2, "a{:05d}")
    small = cost()
    on_fabric("b", 16, 2, "b{:05d}")
    assert cost() == small


def test_the_failure_tab_lists_switches_with_a_link_to_each(client, user):
    on_fabric("ib", 4, 2, "d{:05d}")
    Switch.objects.filter(name="spine-p001-01").update(name="<i>spine</i>")
    client.force_login(user)
    text = client.get("/placement/?tab=failure").content.decode()
    table = text.split('id="switch-ranking"')[1].split("</table>")[0]
    leaf = Switch.objects.get(name="leaf-su0001-r1")
    assert f'href="?tab=failure&amp;switch={leaf.pk}"' in table
    assert "ib/&lt;i&gt;spine&lt;/i&gt;" in table and "<i>spine" not in text
    assert "50%" in table  # a spine of two: half the bisection


def test_the_switch_ranking_counts_every_switch_and_lists_the_first_limit():
    """`count` is every domain ranked, as for racks and servers; `items` the first `limit`."""
    on_fabric("ib", 4, 2, "d{:05d}")
    every = failure_domain_ranking(by="switch", limit=1000)
    top = failure_domain_ranking(by="switch", limit=2)
    assert every["count"] == len(every["items"]) > 2
    assert top["count"] == every["count"] and top["items"] == every["items"][:2]


def test_the_failure_tab_reads_the_per_server_counts_once_for_its_three_rankings(
    django_assert_num_queries,
):
    from placement.failure_domains import failure_domain_rankings

    on_fabric("ib", 4, 2, "d{:05d}")
    with django_assert_num_queries(
        8
    ):  # counts (3), running GPUs, servers, switches, cables, trunks
        every = failure_domain_rankings(limit=5)
    assert every == {
        by: failure_domain_ranking(by=by, limit=5) for by in ("rack", "server", "switch")
    }
    assert every["switch"]["items"] and every["server"]["items"]
