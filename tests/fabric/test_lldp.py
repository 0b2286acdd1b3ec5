"""Ethernet fabrics from LLDP, the pure part: identities, port names, rates, and whose
switch and port a NIC keeps."""

from __future__ import annotations

from fabric import lldp


def neighbor(name="roce-leaf-01", chassis="1C:34:DA:5E:60:00", port="swp17", descr="", mgmt=""):
    return {
        "system_name": name,
        "chassis_id": chassis,
        "port_id": port,
        "port_description": descr,
        "management_address": mgmt,
    }


def nic(nic_id, server_id, name, neighbors, *, mac=None, speed=400000, state="up"):
    return lldp.NicFact(
        nic_id,
        server_id,
        f"gpu-{server_id:02d}",
        name,
        mac if mac is not None else f"b8:3f:d2:00:{server_id:02x}:{nic_id:02x}",
        speed,
        state,
        neighbors,
    )


def test_a_switch_is_its_chassis_mac_else_a_hash_of_its_id_or_name():
    assert lldp.switch_guid("1C:34:DA:5E:60:00", "x") == "1c34da5e6000"
    dotted = lldp.switch_guid("1c34.da5e.6000", None)  # not a MAC as LLDP gives one: hashed
    assert dotted != "1c34da5e6000" and len(dotted) == 16
    assert dotted == lldp.switch_guid("1c34.da5e.6000", "any name")  # the chassis id decides
    assert len(lldp.switch_guid("leaf-07.example", None)) == 16
    assert lldp.switch_guid(None, "Leaf-07") == lldp.switch_guid("", "leaf-07")
    assert lldp.switch_guid(None, None) == ""


def test_the_port_name_is_the_port_id_unless_a_mac_or_an_ifindex_and_a_description_says_more():
    assert lldp.port_name(neighbor(port="Ethernet1/17", descr="to gpu-01")) == "Ethernet1/17"
    assert lldp.port_name(neighbor(port="523", descr="et-0/0/17")) == "et-0/0/17"
    assert lldp.port_name(neighbor(port="1c:34:da:5e:60:11", descr="swp3")) == "swp3"
    assert lldp.port_name(neighbor(port="", descr="swp4")) == "swp4"
    assert lldp.port_name(neighbor(port="523", descr="")) == "523"
    assert [lldp.port_number(p) for p in ("Ethernet1/17", "swp3s1", "mgmt", "99999")] == [
        17,
        1,
        0,
        32767,
    ]


def test_rates_are_written_like_a_cable_rate_and_unknown_when_the_nic_does_not_say():
    assert lldp.ethernet_rate(400000) == ("400GbE", 400.0)
    assert lldp.ethernet_rate(25000) == ("25GbE", 25.0)
    assert lldp.ethernet_rate(None) == ("???", None)
    assert lldp.ethernet_rate(-1) == ("???", None)


def test_nics_heard_make_leaf_switches_adapters_and_one_cable_per_neighbour():
    found = lldp.lldp_fabric(
        [
            nic(1, 1, "mlx5_0", [neighbor(port="swp1", mgmt="10.0.0.1")]),
            nic(2, 1, "mlx5_1", [neighbor("roce-leaf-02", "1c:34:da:5e:61:00", "swp1")]),
            nic(3, 2, "mlx5_0", [neighbor(port="swp2")], state="down"),
            nic(4, 2, "eno1", []),  # lldpd heard nothing on it
            nic(5, 3, "eno2", [{"system_name": None, "chassis_id": None, "port_id": "x"}]),
        ]
    )
    assert sorted(s.name for s in found.switches.values()) == ["roce-leaf-01", "roce-leaf-02"]
    assert found.switches["1c34da5e6000"].description == "roce-leaf-01 (management 10.0.0.1)"
    assert sorted((a.host_name, a.nic) for a in found.adapters.values()) == [
        ("gpu-01", "mlx5_0"),
        ("gpu-01", "mlx5_1"),
        ("gpu-02", "mlx5_0"),
    ]
    assert sorted((link.port_name, link.up, link.lane_speed) for link in found.links) == [
        ("swp1", True, "400GbE"),
        ("swp1", True, "400GbE"),
        ("swp2", False, "400GbE"),
    ]
    assert len({link.key for link in found.links}) == 3 and all(
        len(link.key) <= 80 for link in found.links
    )
    assert found.nic_ports == {
        1: ("roce-leaf-01", "swp1"),
        2: ("roce-leaf-02", "swp1"),
        3: ("roce-leaf-01", "swp2"),
    }


def test_a_mac_two_nics_share_names_neither_and_the_same_facts_give_the_same_keys():
    shared = "b8:3f:d2:00:00:01"
    facts = [
        nic(1, 1, "bond0", [neighbor(port="swp1")], mac=shared),
        nic(2, 2, "bond0", [neighbor(port="swp2")], mac=shared),
        nic(3, 3, "mlx5_0", [neighbor(port="swp3")], mac=""),
    ]
    first, again = lldp.lldp_fabric(facts), lldp.lldp_fabric(list(reversed(facts)))
    assert len(first.adapters) == 3 and "b83fd2000001" not in first.adapters
    assert sorted(link.key for link in first.links) == sorted(link.key for link in again.links)


def test_lldp_fills_a_blank_nic_follows_its_own_entry_and_keeps_a_persons():
    heard = ("leaf-02", "swp9")
    assert lldp.fill_switch_port(("", ""), None, heard) == heard
    assert lldp.fill_switch_port(("leaf-01", "swp1"), ("leaf-01", "swp1"), heard) == heard
    assert lldp.fill_switch_port(("leaf-01", "swp1"), ("leaf-01", "swp1"), None) == ("", "")
    assert lldp.fill_switch_port(("rack-sw", "7"), None, heard) == ("rack-sw", "7")
    assert lldp.fill_switch_port(("rack-sw", "7"), ("leaf-01", "swp1"), heard) == ("rack-sw", "7")
