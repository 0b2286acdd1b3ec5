"""The global search finds fabric switches (name, GUID as people type it) and NICs (name,
netdev, MAC, InfiniBand GUIDs, `host nic`), each linked to its page, in two queries a kind."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric.models import Switch
from fabric.services import fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from inventory.models import Nic, Server
from tests.reports import apply_reports, make_report
from topology.search import search

pytestmark = pytest.mark.django_db

MAC = "94:6d:ae:3c:11:0a"
PORT_GUID = "946dae03003c110a"


def fleet(servers: int = 2, prefix: str = "dgx") -> dict[str, Server]:
    found = apply_reports(*(make_report(f"{prefix}-{i:02d}", nics=2) for i in range(servers)))
    return found


def named_nic() -> Nic:
    nic = Nic.objects.get(server__hostname="dgx-01", name="mlx5_1")
    nic.mac, nic.netdev, nic.port_guid, nic.node_guid = MAC, "ibp41s0", PORT_GUID, PORT_GUID
    nic.port_guids = [PORT_GUID]
    nic.save()
    return nic


@pytest.fixture
def fabric():
    built = synthetic_fabric(servers=4, rails=2, servers_per_leaf=2)
    fabric_snapshot_ingest(fabric_name="ib", raw=built.text)
    return built


def kinds(query: str) -> dict[str, list]:
    return {g.kind: list(g.rows) for g in search(query)}


def test_a_switch_is_found_by_its_name_and_by_its_guid_as_people_type_it(fabric):
    spine = Switch.objects.get(name="spine-p001-01")
    assert [s.pk for s in kinds("spine-p001-01")["switches"]] == [spine.pk]
    assert len(kinds("spine-p001")["switches"]) == 2
    colons = ":".join(spine.guid[i : i + 4] for i in range(0, 16, 4))
    for typed in (spine.guid, f"0x{spine.guid}", f"0X{spine.guid.upper()}", colons):
        assert [s.pk for s in kinds(typed)["switches"]] == [spine.pk], typed
    assert "switches" not in kinds("nothing-like-it")


def test_a_nic_is_found_by_mac_guid_netdev_and_host_and_name():
    fleet()
    nic = named_nic()
    for typed in (MAC, MAC.upper(), MAC.replace(":", "-"), f"0x{PORT_GUID}", "ibp41s0"):
        assert [n.pk for n in kinds(typed)["NICs"]] == [nic.pk], typed
    assert [n.pk for n in kinds("DGX-01 mlx5_1")["NICs"]] == [nic.pk]
    assert len(kinds("mlx5_1")["NICs"]) == 2  # that NIC on every server
    assert "NICs" not in kinds("mlx5")  # a name matches whole, not a part of every name


def test_the_search_page_links_a_switch_to_its_page_and_a_nic_to_its_row(fabric, client, user):
    fleet()
    nic = named_nic()
    Switch.objects.filter(name="spine-p001-02").update(name="<b>spine</b>-2")
    client.force_login(user)
    page = client.get("/search/", {"q": "spine"}).content.decode()
    group = page.split('id="search-switches"')[1].split("</section>")[0]
    spine = Switch.objects.get(name="spine-p001-01")
    assert f'href="/fabric/switches/{spine.pk}/"' in group and "spine, rail" not in group
    assert "&lt;b&gt;spine&lt;/b&gt;-2" in group and "<b>spine" not in page
    page = client.get("/search/", {"q": MAC}).content.decode()
    group = page.split('id="search-nics"')[1].split("</section>")[0]
    assert f'href="/servers/{nic.server_id}/#nic-{nic.pk}"' in group and "dgx-01 mlx5_1" in group
    server_page = client.get(f"/servers/{nic.server_id}/").content.decode()
    assert f'<tr id="nic-{nic.pk}">' in server_page


def test_more_switches_than_shown_link_to_the_switch_list_that_finds_the_same(fabric, client, user):
    client.force_login(user)
    groups = {g.kind: g for g in search("leaf", per_kind=2)}
    assert groups["switches"].total == 4 and groups["switches"].more == 2
    assert groups["switches"].more_url == "/fabric/?search=leaf"
    guid = Switch.objects.get(name="leaf-su0001-r1").guid
    listed = client.get("/fabric/", {"search": f"0x{guid}", "format": "csv"})
    assert b"leaf-su0001-r1" in b"".join(listed) and b"leaf-su0001-r2" not in b"".join(listed)


def test_more_nics_than_shown_ask_for_a_narrower_search(client, user):
    fleet(12)
    client.force_login(user)
    page = client.get("/search/", {"q": "mlx5_0"}).content.decode()
    group = page.split('id="search-nics"')[1].split("</section>")[0]
    assert "(12)" in group and "+2 more: add to the search" in group


def test_switches_and_nics_cost_two_queries_each_and_the_search_no_more_for_more(
    fabric, django_assert_num_queries
):
    from fabric.selectors import switch_search
    from inventory.selectors import nic_search

    def cost() -> int:
        with CaptureQueriesContext(connection) as captured:
            search("1")
        return len(captured)

    fleet(2)
    small = cost()
    fleet(20, prefix="big")
    assert cost() == small
    with django_assert_num_queries(2):
        assert switch_search("leaf", limit=3)[1] == 4
    with django_assert_num_queries(2):
        rows, total = nic_search("mlx5_0", limit=3)
        assert [n.server.hostname for n in rows] == ["big-00", "big-01", "big-02"]
    assert total == 22
