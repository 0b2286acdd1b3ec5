"""What a fabric switch's failure takes, through the database: a leaf of a rail-optimised
fabric takes rail k of each server under it (the NIC, the GPU beside it, the bandwidth, the
nodes that stay up), a spine its share of every server's way up; the picker lists the
fabric's switches by tier; the ranking and the answer say it in the same words."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric.models import Fabric, Switch
from fabric.services import fabric_rebind, fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from inventory.models import Nic
from placement.failure_domains import (
    fabric_switch_choices,
    failure_domain,
    failure_domain_choices,
    failure_domain_ranking,
)
from tests.nodes import scontrol_node, scontrol_text
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


def rail_fabric(name: str = "ib", servers: int = 4, host_format: str = "gpu{:05d}") -> dict:
    """8 rails, 2 servers a leaf, 2 spines: 8-GPU servers whose GPU k has NIC mlx5_k on its
    PCIe switch (PIX), cabled to leaf rail k+1; a Slurm node on each server."""
    from clusters.reconcile import reconcile_all
    from clusters.services import snapshot_ingest

    built = synthetic_fabric(
        servers=servers, rails=8, servers_per_leaf=2, spines_per_pod=2, host_format=host_format
    )
    fabric_snapshot_ingest(fabric_name=name, raw=built.text)
    found = apply_reports(*(make_report(h, gpus=8, nics=8) for h in built.servers))
    fabric_rebind(fabric=Fabric.objects.get(name=name))
    snapshot_ingest(
        cluster_name=f"hpc-{name}", raw=scontrol_text(*(scontrol_node(h) for h in built.servers))
    )
    reconcile_all()
    return found


def test_a_leaf_takes_rail_k_its_nic_the_gpu_beside_it_and_an_eighth_of_each_server(api):
    rail_fabric()
    leaf = Switch.objects.get(name="leaf-su0001-r3")
    answer = api.get(f"/api/v1/failure-domains/?switch={leaf.pk}").json()
    assert (answer["servers"], answer["nodes"], answer["gpus"]) == (0, 0, 0)
    assert [d["hostname"] for d in answer["degraded_servers"]] == ["gpu00001", "gpu00002"]
    first = answer["degraded_servers"][0]
    assert first["loss"] == "rail" and first["rails_lost"] == [3]
    assert first["nics_lost"] == ["mlx5_2"] and first["gpus_nic_lost"] == [2]
    assert (first["gbps_lost"], first["gbps_before"], first["share_lost"]) == (400, 3200, 0.125)
    assert first["gpus"] == 8 and first["nodes"] == ["gpu00001"]
    assert [(n["name"], n["rails_lost"]) for n in answer["degraded_nodes"]] == [
        ("gpu00001", [3]),
        ("gpu00002", [3]),
    ]
    assert [(g["server_hostname"], g["index"], g["nics"]) for g in answer["degraded_gpus"]] == [
        ("gpu00001", 2, ["mlx5_2"]),
        ("gpu00002", 2, ["mlx5_2"]),
    ]
    fabric = answer["fabric"]
    assert (fabric["role"], fabric["rail"], fabric["tier"]) == ("leaf", 3, 1)
    assert (fabric["servers_cut"], fabric["servers_degraded"], fabric["gpus_degraded"]) == (
        0,
        2,
        16,
    )
    assert fabric["gpus_nic_lost"] == 2 and fabric["gbps_lost"] == 800
    assert fabric["server_share_lost_max"] == 0.125 and fabric["job_slots_degraded"] == 2
    assert "800 Gb/s of network lost (12.5% of theirs)" in fabric["message"]
    assert "2 slot(s) of a multi-node job with 8 GPUs a node lose 12.5%" in fabric["per_job"]
    assert answer["workloads"] == []
    ranked = failure_domain_ranking(by="switch", limit=1000)["items"]
    assert next(i for i in ranked if i["id"] == leaf.pk)["message"] == fabric["message"]


def test_a_spine_takes_its_share_of_the_bisection_and_of_every_servers_way_up(api):
    rail_fabric()
    spine = Switch.objects.get(name="spine-p001-02")
    answer = api.get(f"/api/v1/failure-domains/?switch={spine.pk}").json()
    fabric = answer["fabric"]
    assert answer["servers"] == 0 and fabric["bisection_share_lost"] == 0.5
    assert fabric["role"] == "spine" and fabric["bandwidth_between"] == "leaf-to-spine"
    assert {(d["loss"], d["share_lost"], d["gbps_lost"]) for d in answer["degraded_servers"]} == {
        ("uplink", 0.5, 1600.0)
    }
    assert len(answer["degraded_servers"]) == 4 and len(answer["degraded_nodes"]) == 4
    assert answer["degraded_gpus"] == [] and fabric["job_slots_degraded"] == 4
    assert fabric["message"].startswith(
        "spine-p001-02 carries 50% of the leaf-to-spine (bisection) bandwidth"
    )
    assert "4 server(s) lose 50% of theirs beyond their leaf" in fabric["message"]
    ranked = failure_domain_ranking(by="switch", limit=1000)["items"]
    item = next(i for i in ranked if i["id"] == spine.pk)
    assert item["message"] == fabric["message"] and item["servers_degraded"] == 4


def test_a_leaf_holding_every_cable_of_its_servers_cuts_them_off_with_their_nodes_and_gpus():
    built = synthetic_fabric(servers=2, rails=1, servers_per_leaf=2, host_format="s{:05d}")
    fabric_snapshot_ingest(fabric_name="eth", raw=built.text)
    apply_reports(*(make_report(h, gpus=8, nics=1) for h in built.servers))
    fabric_rebind(fabric=Fabric.objects.get(name="eth"))
    domain = failure_domain(switch=str(Switch.objects.get(name="leaf-su0001-r1").pk))
    assert (domain["servers"], domain["gpus"], domain["degraded_servers"]) == (2, 16, [])
    assert domain["fabric"]["servers_cut"] == 2 and "cut off" in domain["fabric"]["message"]
    assert domain["fabric"]["gbps_lost"] == 800


def test_a_switch_by_name_says_which_nics_and_gpus_it_takes():
    apply_reports(make_report("a", nics=2), make_report("b", nics=2))
    Nic.objects.filter(server__hostname="a", name="mlx5_0").update(switch="leaf-1")
    Nic.objects.filter(server__hostname="a", name="mlx5_1").update(switch="leaf-2")
    Nic.objects.filter(server__hostname="b").update(switch="leaf-1")
    domain = failure_domain(switch="leaf-1")
    assert [s["hostname"] for s in domain["server_list"]] == ["b"]
    (a,) = domain["degraded_servers"]
    assert (a["hostname"], a["other_switches"], a["loss"]) == ("a", ["leaf-2"], "nic")
    assert (a["nics_lost"], a["gpus_nic_lost"], a["share_lost"]) == (["mlx5_0"], [0], 0.5)
    assert [g["index"] for g in domain["degraded_gpus"]] == [0]
    assert domain["fabric"] is None and domain["workloads"] == []


@pytest.mark.parametrize(("name", "queries"), [("leaf-su0001-r1", 11), ("spine-p001-01", 12)])
def test_a_switch_failure_costs_a_fixed_number_of_queries(name, queries):
    """The switch's reads (five for a leaf, six for a spine) and the fleet's (six, then the
    GPU counts), then the running workloads on the degraded servers; nothing is cut off, so
    no lost GPU or MIG device is read."""

    def cost() -> int:
        switch = Switch.objects.filter(name=name).order_by("pk").last()
        with CaptureQueriesContext(connection) as captured:
            failure_domain(switch=str(switch.pk))
        return len(captured)

    rail_fabric("small", 2, "a{:05d}")
    assert cost() == queries
    rail_fabric("large", 8, "b{:05d}")
    assert cost() == queries


def test_the_picker_lists_the_fabrics_switches_by_tier_in_one_query(django_assert_num_queries):
    rail_fabric(servers=2)
    Nic.objects.filter(name="mlx5_0").update(switch="tor-1")
    with django_assert_num_queries(1):
        groups = fabric_switch_choices()
    assert [g["label"] for g in groups] == ["ib: leaves", "ib: spines"]
    leaves = groups[0]["switches"]
    assert [s["rail"] for s in leaves] == list(range(1, 9)) and leaves[0]["name"].startswith(
        "leaf-"
    )
    assert [s["name"] for s in groups[1]["switches"]] == ["spine-p001-01", "spine-p001-02"]
    with django_assert_num_queries(2):  # racks and the switches people and LLDP name
        assert failure_domain_choices()["switches"] == ["tor-1"]


def test_the_failure_tab_picks_a_leaf_and_says_what_it_takes(client, user):
    rail_fabric(servers=2)
    leaf = Switch.objects.get(name="leaf-su0001-r3")
    Switch.objects.filter(name="spine-p001-01").update(name="<b>spine</b>")
    client.force_login(user)
    page = client.get("/placement/?tab=failure").content.decode()
    picker = page.split('id="failure-switch"')[1].split("</select>")[0]
    assert '<optgroup label="ib: leaves">' in picker and '<optgroup label="ib: spines">' in picker
    assert f'<option value="{leaf.pk}" >leaf-su0001-r3 (rail 3)</option>' in picker
    assert "&lt;b&gt;spine&lt;/b&gt;" in picker and "<b>spine" not in page
    page = client.get(f"/placement/?tab=failure&switch={leaf.pk}").content.decode()
    assert "If leaf ib/leaf-su0001-r3 fails" in page
    assert f'<option value="{leaf.pk}" selected>' in page
    words = page.split('id="failure-fabric-words"')[1].split("</p>")[0]
    assert "takes rail 3 of 2 server(s)" in words and "12.5% of theirs" in words
    line = page.split('id="failure-degraded-line"')[1].split("</p>")[0]
    assert ">2</span> servers" in line and ">2</span> GPUs lose their NIC" in line
    table = page.split('id="failure-degraded"')[1].split("</table>")[0]
    assert "mlx5_2" in table and "GPU 2" in table and "12.5%" in table and "400" in table
    assert "slot(s) of a multi-node job" in page
    spine = Switch.objects.get(name="spine-p001-02")
    page = client.get(f"/placement/?tab=failure&switch={spine.pk}").content.decode()
    assert "If spine ib/spine-p001-02 fails" in page
    assert "Servers that lose part of their way up" in page and "beyond its leaf" in page
    table = page.split('id="failure-degraded"')[1].split("</table>")[0]
    assert table.count("<tr>") == 3 and "50%" in table and "NIC lost" not in table
