"""Location rules on hand-built facts: an IP address on several servers, servers overlapping
in a rack. No database."""

from __future__ import annotations

from datetime import timedelta

from clusters.rules.location import (
    IGNORED_ADDRESSES,
    NAMES_MOST,
    ip_address_duplicate,
    location_inputs,
    rack_units_overlap,
)
from clusters.rules.registry import FLEET_RULES, LOCATION_RULES, SERVER_RULES
from findings.choices import FindingType, Severity

from .fleets import NOW, OFFLINE_AFTER, fleet, one, server

OFFLINE = NOW - OFFLINE_AFTER - timedelta(minutes=1)


# ip_address_duplicate -----------------------------------------------------------------


def test_an_address_two_servers_report_is_one_finding_naming_both():
    servers = [
        server(1, addresses=("10.0.0.7/24", "10.0.1.1/24")),
        server(2, addresses=("10.0.0.7/16",)),
        server(3, addresses=("10.0.0.8/24",)),
    ]
    found = one(ip_address_duplicate(fleet(servers)))
    assert (found.type, found.severity, found.subject, found.server_id) == (
        FindingType.IP_ADDRESS_DUPLICATE,
        Severity.WARNING,
        "address:10.0.0.7",
        1,
    )
    assert found.message == (
        "10.0.0.7 is on 2 live servers (dgx-01, dgx-02): one address, several machines; "
        "traffic to it and nodes bound by it may reach the wrong one"
    )
    assert found.details == {"address": "10.0.0.7", "servers": ["dgx-01", "dgx-02"], "count": 2}


def test_many_servers_on_one_address_are_named_first_by_hostname_then_counted():
    servers = [server(i, hostname=f"n{20 - i:02d}", addresses=("10.9.9.9",)) for i in range(1, 9)]
    found = one(ip_address_duplicate(fleet(servers)))
    assert found.details["servers"] == ["n12", "n13", "n14", "n15", "n16"]
    assert found.details["count"] == 8 and NAMES_MOST == 5
    assert "(n12, n13, n14, n15, n16 and 3 more)" in found.message
    assert found.server_id == 8  # n12


def test_ipv6_addresses_compare_in_their_short_form():
    servers = [
        server(1, addresses=("2001:db8:0:0::1/64",)),
        server(2, addresses=("2001:DB8::1",)),
    ]
    assert one(ip_address_duplicate(fleet(servers))).subject == "address:2001:db8::1"


def test_loopback_link_local_and_default_bridges_are_never_duplicates():
    shared = (
        "127.0.0.1/8",
        "127.0.1.1",
        "::1/128",
        "fe80::1/64",
        "169.254.169.254/16",
        "172.17.0.1/16",
        "192.168.122.1/24",
        "10.88.0.1/16",
    )
    servers = [server(1, addresses=shared), server(2, addresses=shared)]
    assert ip_address_duplicate(fleet(servers)) == []
    assert "172.17.0.1/32" in IGNORED_ADDRESSES


def test_another_address_on_a_default_bridge_network_is_still_compared():
    servers = [server(1, addresses=("172.17.0.2/16",)), server(2, addresses=("172.17.0.2/16",))]
    assert one(ip_address_duplicate(fleet(servers))).subject == "address:172.17.0.2"


def test_an_offline_server_does_not_count_a_stale_one_does():
    stale = NOW - timedelta(minutes=30)
    servers = [
        server(1, addresses=("10.0.0.7",)),
        server(2, addresses=("10.0.0.7",), last_seen=OFFLINE),
        server(3, addresses=("10.0.0.8",)),
        server(4, addresses=("10.0.0.8",), last_seen=stale),
        server(5, addresses=("10.0.0.9",), last_seen=None),
        server(6, addresses=("10.0.0.9",)),
    ]
    assert [f.subject for f in ip_address_duplicate(fleet(servers))] == ["address:10.0.0.8"]


def test_a_vm_and_its_host_do_not_share_an_address_either():
    servers = [
        server(1, addresses=("10.0.0.7/24",)),
        server(2, addresses=("10.0.0.7/24",), is_virtual=True, physical_host_id=1),
    ]
    assert one(ip_address_duplicate(fleet(servers))).details["servers"] == ["dgx-01", "dgx-02"]


def test_names_and_one_servers_repeated_address_are_not_duplicates():
    servers = [
        server(1, addresses=("dgx.lab", "10.0.0.7/24", "10.0.0.7/16")),
        server(2, addresses=("dgx.lab", "not an address", "")),
    ]
    assert ip_address_duplicate(fleet(servers)) == []


# rack_units_overlap -------------------------------------------------------------------


def racked(id: int, rack: str = "R1", position: int | None = 1, **facts):
    facts.setdefault("product", "DGXH100")  # 8U
    return server(id, rack=rack, rack_position=position, **facts)


def test_two_servers_whose_units_overlap_by_their_height():
    servers = [racked(2, position=10), racked(1, position=17)]  # U10-U17 and U17-U24
    found = one(rack_units_overlap(fleet(servers)))
    assert (found.type, found.severity, found.subject, found.server_id) == (
        FindingType.RACK_UNITS_OVERLAP,
        Severity.WARNING,
        "server:1:overlaps:2",
        1,
    )
    assert found.message == (
        "rack R1: dgx-02 (U10-U17, 8U) and dgx-01 (U17-U24, 8U) overlap at U17; two servers "
        "cannot share a rack unit: fix the rack position of one"
    )
    assert found.details == {
        "rack": "R1",
        "servers": [
            {"hostname": "dgx-02", "units": [10, 17], "height_known": True},
            {"hostname": "dgx-01", "units": [17, 24], "height_known": True},
        ],
        "overlap": [17, 17],
    }


def test_adjacent_servers_do_not_overlap():
    servers = [racked(1, position=10), racked(2, position=18), racked(3, position=26)]
    assert rack_units_overlap(fleet(servers)) == []


def test_servers_in_different_racks_do_not_overlap():
    servers = [racked(1, rack="R1", position=10), racked(2, rack="R2", position=10)]
    assert rack_units_overlap(fleet(servers)) == []


def test_a_server_inside_a_taller_one_and_a_third_on_both():
    servers = [
        racked(1, position=1),  # U1-U8
        racked(2, position=3, product="PowerEdge R650"),  # U3, 1U
        racked(3, position=8, product="PowerEdge R750xa"),  # U8-U9, 2U
    ]
    found = {f.subject: f for f in rack_units_overlap(fleet(servers))}
    assert sorted(found) == ["server:1:overlaps:2", "server:1:overlaps:3"]
    assert found["server:1:overlaps:2"].details["overlap"] == [3, 3]
    assert "dgx-03 (U8-U9, 2U)" in found["server:1:overlaps:3"].message


def test_a_server_of_unknown_height_counts_one_unit():
    servers = [
        racked(1, position=10, product="Some Box 3000"),
        racked(2, position=11, product="Some Box 3000"),
    ]
    assert rack_units_overlap(fleet(servers)) == []
    servers.append(racked(3, position=11, product="", vendor=""))
    found = one(rack_units_overlap(fleet(servers)))
    assert found.subject == "server:2:overlaps:3"
    assert "dgx-02 (U11, height unknown: counted 1U)" in found.message


def test_the_vendor_names_the_chassis_when_the_product_is_empty():
    servers = [racked(1, position=1, product="", vendor="DGXH100"), racked(2, position=5)]
    assert one(rack_units_overlap(fleet(servers))).details["overlap"] == [5, 8]


def test_unplaced_servers_and_vms_never_overlap():
    servers = [
        racked(1, position=1),
        racked(2, position=None),
        racked(3, position=0),
        racked(4, rack="", position=1),
        racked(5, position=1, is_virtual=True, physical_host_id=1),
    ]
    assert rack_units_overlap(fleet(servers)) == []


def test_an_offline_server_still_takes_its_units():
    servers = [racked(1, position=1, last_seen=OFFLINE), racked(2, position=1)]
    assert one(rack_units_overlap(fleet(servers))).subject == "server:1:overlaps:2"


# Their place in the registry ----------------------------------------------------------


def test_location_rules_are_fleet_rules_and_say_what_they_read():
    assert set(LOCATION_RULES) <= set(FLEET_RULES)
    assert set(LOCATION_RULES).isdisjoint(SERVER_RULES)
    inputs = location_inputs(fleet([]), racked(1, position=3, addresses=("10.0.0.7",)))
    assert set(inputs) == {rule.__name__ for rule in LOCATION_RULES}
    offline = location_inputs(
        fleet([]), racked(1, position=3, addresses=("10.0.0.7",), last_seen=OFFLINE)
    )
    assert offline["ip_address_duplicate"] != inputs["ip_address_duplicate"]
    assert offline["rack_units_overlap"] == inputs["rack_units_overlap"]
