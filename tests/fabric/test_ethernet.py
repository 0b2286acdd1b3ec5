"""Ethernet fabrics from the LLDP neighbours agents report: the fabric's switches, cables and
rails, each NIC's switch and port, the server page, failure domains; a person's cabling kept,
pushes refused, queries that do not grow with the fleet."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric.choices import FabricKind
from fabric.models import Adapter, Fabric, FabricLink, FabricSnapshot, Switch
from fabric.services import ETHERNET_FABRIC, FabricRejected, ethernet_fabric_sync
from fabric.tasks import rebind_fabrics
from inventory.models import Nic, Server
from inventory.services import revision_bump
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


def leaf(rail: int, unit: int = 1) -> tuple[str, str]:
    return f"roce-su{unit}-r{rail}", f"1c:34:da:5e:{unit:02x}:{rail:02x}"


def report(host: str, number: int, *, unit: int = 1, ports: dict[int, str] | None = None):
    """A server with two RoCE NICs, NIC k on the unit's rail-k leaf, port swp<number>."""
    built = make_report(host, gpus=4, nics=2)
    for k, nic in enumerate(built["nics"]):
        name, chassis = leaf(k + 1, unit)
        nic.update(
            kind="ethernet",
            netdev=f"ens{k + 1}f0np0",
            mac=f"b8:3f:d2:{unit:02x}:{number:02x}:{k:02x}",
            state="up",
            lldp_neighbors=[
                {
                    "system_name": name,
                    "chassis_id": chassis,
                    "port_id": (ports or {}).get(k, f"swp{number}"),
                    "port_description": f"to {host}",
                    "management_address": f"10.0.{unit}.{k + 1}",
                }
            ],
        )
    return built


def fleet(count: int, unit: int = 1, **kwargs) -> dict[str, Server]:
    return apply_reports(
        *(report(f"u{unit}-gpu{n:02d}", n, unit=unit, **kwargs) for n in range(1, count + 1))
    )


def test_lldp_neighbours_make_an_ethernet_fabric_of_rail_leaves_bound_to_their_servers():
    servers = fleet(4)
    result = ethernet_fabric_sync()
    assert (result.switches, result.nics, result.links, result.nics_filled) == (2, 8, 8, 8)
    fabric = Fabric.objects.get(name=ETHERNET_FABRIC)
    assert fabric.kind == FabricKind.ETHERNET
    assert fabric.summary["tiers"] == {"leaf": 2} and fabric.summary["rail_optimised"]
    assert {(s.name, s.tier, s.rail) for s in Switch.objects.all()} == {
        ("roce-su1-r1", 1, 1),
        ("roce-su1-r2", 1, 2),
    }
    adapter = Adapter.objects.get(server=servers["u1-gpu03"], nic="mlx5_1")
    assert (adapter.binding_method, adapter.rail, adapter.guid) == ("lldp", 2, "b83fd2010301")
    link = FabricLink.objects.get(b_adapter=adapter)
    assert (link.a_switch.name, link.a_port_name, link.a_port, link.speed, link.gbps) == (
        "roce-su1-r2",
        "swp3",
        3,
        "400GbE",
        400.0,
    )
    nic = Nic.objects.get(server=servers["u1-gpu03"], name="mlx5_1")
    assert (nic.switch, nic.switch_port) == ("roce-su1-r2", "swp3")
    snapshot = FabricSnapshot.objects.get(fabric=fabric)
    assert (snapshot.format, snapshot.switch_count, snapshot.link_count) == ("lldp", 2, 8)


def test_a_second_pass_without_new_reports_does_nothing_and_the_task_runs_it():
    fleet(2)
    rebind_fabrics()  # the periodic task reads LLDP before it binds the other fabrics
    assert Switch.objects.count() == 2
    assert ethernet_fabric_sync().skipped == "unchanged"
    again = ethernet_fabric_sync(force=True)
    assert (again.added, again.gone, again.nics_filled) == (0, 0, 0)
    assert FabricSnapshot.objects.count() == 1  # nothing came or went: no new snapshot


def test_a_persons_cabling_is_kept_and_lldps_own_follows_the_cable():
    servers = fleet(2)
    mine = Nic.objects.get(server=servers["u1-gpu01"], name="mlx5_0")
    mine.switch, mine.switch_port = "patch-panel-7", "12"
    mine.save()
    ethernet_fabric_sync()
    mine.refresh_from_db()
    assert (mine.switch, mine.switch_port) == ("patch-panel-7", "12")
    other = Nic.objects.get(server=servers["u1-gpu02"], name="mlx5_0")
    assert (other.switch, other.switch_port) == ("roce-su1-r1", "swp2")

    # gpu02's first NIC moves to swp30; its second NIC is no longer heard at all.
    moved = report("u1-gpu02", 2, ports={0: "swp30"})["nics"]
    Nic.objects.filter(pk=other.pk).update(lldp_neighbors=moved[0]["lldp_neighbors"])
    Nic.objects.filter(server=servers["u1-gpu02"], name="mlx5_1").update(lldp_neighbors=[])
    revision_bump(name="inventory")  # what applying the agent's next report does
    result = ethernet_fabric_sync()
    other.refresh_from_db()
    assert (other.switch, other.switch_port) == ("roce-su1-r1", "swp30")
    unheard = Nic.objects.get(server=servers["u1-gpu02"], name="mlx5_1")
    assert (unheard.switch, unheard.switch_port) == ("", "")
    assert result.gone == 3  # the old cable and the unheard NIC's cable and adapter
    assert FabricLink.objects.filter(gone_at__isnull=True).count() == 3


def test_nothing_is_pushed_to_the_ethernet_fabric(staff_api):
    fleet(2)
    ethernet_fabric_sync()
    with pytest.raises(FabricRejected) as refused:
        from fabric.services import node_name_map_set

        node_name_map_set(fabric_name=ETHERNET_FABRIC, raw='0x0002c90300000001 "x"\n')
    assert refused.value.field == "name"
    answer = staff_api.post(
        f"/api/v1/fabrics/{ETHERNET_FABRIC}/snapshots/",
        data=b'Switch 36 "S-0002c90300000001"\n',
        content_type="text/plain",
    )
    assert answer.status_code == 400 and "LLDP" in str(answer.json())


def test_no_lldp_anywhere_makes_no_fabric_and_an_infiniband_fabric_of_that_name_is_left_alone():
    apply_reports(make_report("ib-01", gpus=4, nics=2))
    assert ethernet_fabric_sync().skipped == "no LLDP neighbours"
    assert not Fabric.objects.exists()
    Fabric.objects.create(name=ETHERNET_FABRIC)
    fleet(2)
    assert ethernet_fabric_sync().skipped == "an InfiniBand fabric"
    assert not Switch.objects.exists()


def test_the_server_page_shows_each_ethernet_nics_switch_port_rail_and_speed_escaped(client, user):
    hostile = report("u1-gpu01", 1, ports={0: "<b>swp1</b>"})
    hostile["nics"][1]["lldp_neighbors"][0]["system_name"] = "<script>alert(1)</script>"
    servers = apply_reports(hostile, report("u1-gpu02", 2))
    ethernet_fabric_sync()
    client.force_login(user)
    text = client.get(f"/servers/{servers['u1-gpu01'].pk}/").content.decode()
    assert 'id="server-fabric-ethernet"' in text
    table = text.split('id="server-fabric-ethernet"')[1].split("</table>")[0]
    assert "roce-su1-r1" in table and "400GbE" in table and "&lt;b&gt;swp1&lt;/b&gt;" in table
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in table
    assert "<script>alert" not in text and "<b>swp1" not in text
    nics = text.split('id="nic-table"')[1].split("</table>")[0]
    assert "&lt;b&gt;swp1&lt;/b&gt;" in nics  # the NIC's own switch port, filled from LLDP
    switch = Switch.objects.get(name="roce-su1-r1")
    page = client.get(f"/fabric/switches/{switch.pk}/").content.decode()
    assert "&lt;b&gt;swp1&lt;/b&gt;" in page and "swp2" in page
    figure = client.get("/fabric/").content.decode()
    assert 'id="figure-ethernet-data"' in figure and "<script>alert" not in figure
    assert "&lt;script&gt;" in figure  # the switch list; the figure's hover text is escaped too


def test_a_failure_of_an_ethernet_leaf_takes_a_rail_and_its_name_finds_the_servers(api):
    fleet(3)
    ethernet_fabric_sync()
    switch = Switch.objects.get(name="roce-su1-r2")
    domain = api.get(f"/api/v1/failure-domains/?switch={switch.pk}").json()
    assert domain["servers"] == 0 and domain["fabric"]["servers_degraded"] == 3
    assert {d["rails_lost"] == [2] for d in domain["degraded_servers"]} == {True}
    by_name = api.get("/api/v1/failure-domains/?switch=roce-su1-r2").json()
    assert by_name["servers"] == 0 and len(by_name["degraded_servers"]) == 3


def test_the_pass_costs_the_same_queries_for_two_servers_and_eight():
    def cost(count: int, unit: int) -> int:
        Fabric.objects.all().delete()
        Server.objects.all().delete()
        fleet(count, unit=unit)
        with CaptureQueriesContext(connection) as captured:
            ethernet_fabric_sync()
        return len(captured)

    cost(1, 9)  # the first pass ever also creates the revision counters
    assert cost(2, 1) == cost(8, 2)
