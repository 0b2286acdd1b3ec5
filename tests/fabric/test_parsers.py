"""ibnetdiscover parsers on the real captures and on fixtures of our own: every node, port,
LID and rate read; outputs cut short, without a switch, or not ibnetdiscover refused."""

from __future__ import annotations

from collections import Counter

import pytest

from fabric.binding import AGGREGATION, adapter_role, description_set
from fabric.parsers import (
    FabricFormatError,
    decode,
    detect_format,
    link_gbps,
    parse_fabric,
    parse_node_name_map,
)
from fabric.synthetic import synthetic_fabric

from .conftest import FABRIC_SAMPLES, SAMPLES, fixture_text, shared_samples


def test_repository_copies_match_the_shared_samples():
    shared = shared_samples()
    if shared is None:
        pytest.skip("no shared samples folder beside this checkout")
    for name in FABRIC_SAMPLES:
        assert (SAMPLES / name).read_bytes() == (shared / name).read_bytes(), name


# -- the NDR SuperPOD (plain) ----------------------------------------------------------


def test_superpod_switches_adapters_and_cables(superpod):
    found = parse_fabric(superpod)

    assert found.format == "ibnetdiscover"
    assert found.initiated_from == "e09d730300156ff6"
    assert len(found.switches) == 40
    assert len(found.adapters) == 582
    assert {s.port_count for s in found.switches} == {65}
    assert all(s.lid for s in found.switches)
    names = Counter(s.description.split(";")[1].split("-")[2] for s in found.switches)
    assert names == {"IBLEAF": 31, "IBSPINE": 9}
    assert len(found.links) == 1114
    assert {(link.width, link.speed, link.gbps) for link in found.links} == {("4x", "NDR", 400.0)}
    assert all(link.up for link in found.links)


def test_superpod_one_cable_read_from_both_ends(superpod):
    found = parse_fabric(superpod)
    leaf = found.nodes["2c5eab0300b87b40"]
    adapter = found.nodes["e09d7303007a4bd8"]

    assert leaf.description == "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1"
    assert leaf.lid == 73 and leaf.system_guid == "2c5eab0300b87b40"
    assert adapter.kind == "ca" and adapter.description == "a08-p1-dgx-04-c01 mlx5_5"
    assert adapter.port_guids == {1: "e09d7303007a4bd8"} and adapter.port_lids == {1: 647}
    (cable,) = [link for link in found.links if link.b_guid == adapter.guid]
    assert (cable.a_guid, cable.a_port, cable.a_lid) == (leaf.guid, 1, 73)
    assert (cable.b_port, cable.b_lid) == (1, 647)


def test_superpod_unset_descriptions_and_sharp_aggregation_nodes(superpod):
    found = parse_fabric(superpod)
    systems = {s.system_guid for s in found.switches}
    roles = Counter(
        adapter_role(a.kind, a.description, a.system_guid, systems) for a in found.adapters
    )
    unset = [a for a in found.adapters if not description_set(a.description)]

    assert roles[AGGREGATION] == 40  # one per switch, on its internal port 65
    assert len(unset) == 69 + 40
    assert Counter(a.description for a in unset)["MT4129 ConnectX7   Mellanox Technologies"] == 69


# -- the EDR ports report (-p) ------------------------------------------------------------


def test_ports_report_reads_cas_switches_and_idle_ports(treydock):
    found = parse_fabric(treydock)

    assert found.format == "ibnetdiscover-ports"
    assert sorted(a.description for a in found.adapters) == [
        "o0001 HCA-1",
        "o0002 HCA-1",
        "p0001 HCA-1",
    ]
    assert all(not a.node_guid_known for a in found.adapters)
    switch = found.nodes["7cfe9003009ce5b0"]
    assert (switch.description, switch.lid) == ("ib-i1l1s01", 1719)
    known_only_as_peer = found.nodes["7cfe900300b07320"]
    assert (known_only_as_peer.description, known_only_as_peer.described) == ("ib-i1l2s01", False)
    cables = [link for link in found.links if link.up]
    idle = {(link.a_guid, link.a_port): link for link in found.links if not link.up}
    assert len(cables) == 4  # CA and SW lines of the same cable count once
    assert {(c.width, c.speed, c.gbps) for c in cables} == {("4x", "EDR", 100.0)}
    assert set(idle) == {("506b4b03005c2740", 37), ("08c0eb0300add20e", 80)}
    assert idle[("506b4b03005c2740", 37)].speed == "???"
    assert idle[("506b4b03005c2740", 37)].gbps is None
    (hca,) = [link for link in cables if link.b_guid == "7cfe9003003b4bde"]
    assert (hca.a_guid, hca.a_port, hca.a_lid, hca.b_lid) == ("7cfe9003009ce5b0", 10, 1719, 134)


# -- our own fixtures --------------------------------------------------------------------


def test_dual_port_hca_router_and_unknown_rate():
    found = parse_fabric(fixture_text("ibnetdiscover-router-dualport.out"))
    dual = found.nodes["0002c9030000a001"]
    router = found.nodes["0002c9030000b001"]

    assert dual.port_count == 2
    assert dual.port_guids == {1: "0002c9030000a002", 2: "0002c9030000a003"}
    assert dual.port_lids == {1: 21, 2: 22}
    leaves = {link.a_guid for link in found.links if link.b_guid == dual.guid}
    assert leaves == {"0008f10500200001", "0008f10500200002"}
    assert router.kind == "router" and router.description == "ib-router-1"
    (unknown,) = [link for link in found.links if link.b_guid == "506b4b0300000041"]
    assert unknown.up and unknown.speed == "???" and unknown.gbps is None
    (narrow,) = [link for link in found.links if link.b_guid == "506b4b0300000031"]
    assert (narrow.width, narrow.gbps) == ("1x", 50.0)


def test_ports_report_of_a_fabric_split_in_two():
    found = parse_fabric(fixture_text("ibnetdiscover-p-split.out"))

    assert len(found.switches) == 4
    assert [a.kind for a in found.adapters].count("router") == 1
    (half,) = [link for link in found.links if link.b_guid == "506b4b0300000062"]
    assert (half.width, half.gbps) == ("2x", 100.0)
    assert sum(1 for link in found.links if not link.up) == 1


def test_synthetic_fabric_reads_back_as_built():
    built = synthetic_fabric(servers=12, rails=4, servers_per_leaf=4, spines_per_pod=2)
    found = parse_fabric(built.text)

    assert len(found.switches) == 3 * 4 + 2
    assert len(found.adapters) == 12 * 4
    names = {n.guid: n.description for n in found.nodes.values()}
    for link in found.links:
        if names[link.b_guid].startswith("gpu"):
            host, nic = names[link.b_guid].split()
            rail = int(nic.removeprefix("mlx5_")) + 1
            assert names[link.a_guid] == f"MF0;{built.host_leaf[(host, rail)]}:MQM9700/U1"


# -- refused ----------------------------------------------------------------------------


def _cut_at_line_boundary(text: str, marker: str, after: int) -> str:
    return text[: text.index(marker, after) + 1]


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(lambda t: t[: len(t) // 2], id="mid-line"),
        pytest.param(lambda t: t[:-3], id="last-line-short"),
        pytest.param(lambda t: _cut_at_line_boundary(t, "\nvendid", len(t) // 2), id="between-cas"),
        pytest.param(lambda t: _cut_at_line_boundary(t, "\nCa\t", 100) + "\n", id="before-cas"),
        pytest.param(lambda t: _cut_at_line_boundary(t, "\n[20]", 100), id="inside-a-switch"),
        pytest.param(lambda t: _cut_at_line_boundary(t, "\ncaguid", len(t) // 2), id="in-ids"),
    ],
)
def test_an_output_cut_short_is_refused(superpod, cut):
    text = superpod.decode()
    with pytest.raises(FabricFormatError, match="cut short"):
        parse_fabric(cut(text))


def test_a_port_line_cut_inside_the_rate_is_refused(superpod):
    text = superpod.decode().rstrip("\n")
    with pytest.raises(FabricFormatError, match="cut short"):
        parse_fabric(text[:-1])  # ...4xND
    assert len(parse_fabric(text).links) == 1114  # a missing final newline alone is fine


def test_a_host_that_sees_only_its_own_adapter_is_refused():
    text = (
        "#\n# Topology file: generated on Mon Jan  6 10:00:00 2025\n#\n"
        "# Initiated from node 506b4b0300000021 port 506b4b0300000021\n\n"
        "vendid=0x2c9\ndevid=0x1021\nsysimgguid=0x506b4b0300000021\n"
        "caguid=0x506b4b0300000021\n"
        'Ca\t1 "H-506b4b0300000021"\t\t# "dgx-02 mlx5_0"\n\n'
    )
    with pytest.raises(FabricFormatError, match="no switch: the output names 1 adapter "):
        parse_fabric(text)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("", "empty"),
        ('{"items": []}', "not ibnetdiscover output"),
        (b"\xff\xfeS\x00W\x00", "not UTF-8"),
        (
            'Switch\t36 "S-0008f10500200001"\t\t# "x" enhanced port 0 lid 1 lmc 0\n'
            "this line is not ibnetdiscover\n",
            "line 2 is not ibnetdiscover output",
        ),
        ("SW 1 1 0x01 4x EDR - CA 2 1 0x02 ( 'a' - 'b' )\nSW two\n", "line 2 is not"),
    ],
)
def test_what_is_not_ibnetdiscover_output_is_refused(body, message):
    with pytest.raises(FabricFormatError, match=message):
        parse_fabric(body)


_SWITCH = 'Switch\t{ports} "S-0008f10500200001"\t\t# "leaf" enhanced port 0 lid {lid} lmc 0\n'
_TO_CA = '[{port}]\t"H-0002c9030000a001"[1](2c9030000a001) \t\t# "dgx-01 mlx5_0" lid {lid} 4xHDR\n'
_CA = (
    '\nCa\t1 "H-0002c9030000a001"\t\t# "dgx-01 mlx5_0"\n'
    '[1](2c9030000a001) \t"S-0008f10500200001"[{port}]\t\t# lid {lid} lmc 0 "leaf" lid 10 4xHDR\n'
)
_PORTS_LINE = (
    "SW 3 {port} 0x0008f10500300001 4x HDR - CA {lid} 1 0x506b4b0300000051 ( 'l' - 'n' )\n"
)


def _plain(ports=36, port=1, switch_lid=10, ca_lid=21):
    return (
        _SWITCH.format(ports=ports, lid=switch_lid)
        + _TO_CA.format(port=port, lid=ca_lid)
        + _CA.format(port=port, lid=ca_lid)
    )


def test_the_small_plain_fixture_reads():
    assert len(parse_fabric(_plain()).links) == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_plain(ports=99999), "99999 ports"),
        (_plain(port=40000), "port number over 32767"),
        (_plain(ca_lid=3_000_000_000), "LID over 2147483647"),
        (_plain(switch_lid=3_000_000_000), "LID over 2147483647"),
        (_PORTS_LINE.format(port=99999, lid=7), "99999 ports"),
        (_PORTS_LINE.format(port=1, lid=99_999_999_999), "LID over 2147483647"),
    ],
)
def test_ports_and_lids_past_what_their_columns_hold_are_refused(text, message):
    """No real output comes near (ports are 8 bits, LIDs 16): a 400, not a database error."""
    with pytest.raises(FabricFormatError, match=message):
        parse_fabric(text)


def test_nul_characters_are_refused_as_every_text_input_refuses_them():
    with pytest.raises(FabricFormatError, match="NUL character at line 2"):
        parse_fabric(_plain().replace("dgx-01", "dgx\x00-01", 1))
    with pytest.raises(FabricFormatError, match="NUL character"):
        parse_node_name_map(decode(b'0x0002c9030000a001 "dgx\x00"\n'))


def test_byte_order_mark_and_crlf_are_read(treydock):
    text = "\ufeff" + treydock.decode().replace("\n", "\r\n")
    assert len(parse_fabric(text.encode()).links) == 6


def test_format_detection():
    assert detect_format(fixture_text("ibnetdiscover-router-dualport.out")) == "ibnetdiscover"
    assert detect_format(fixture_text("ibnetdiscover-p-split.out")) == "ibnetdiscover-ports"


def test_link_rates():
    assert link_gbps("4x", "NDR") == 400.0
    assert link_gbps("4x", "HDR") == 200.0
    assert link_gbps("4x", "QDR") == 40.0
    assert link_gbps("1x", "NDR") == 100.0
    assert link_gbps("4x", "???") is None
    assert link_gbps("??", "EDR") is None


# -- node-name maps ----------------------------------------------------------------------


def test_node_name_map_in_ibnetdiscovers_format():
    names = parse_node_name_map(
        "# generated by the admins\n"
        '0x2c5eab0300b87b40 "leaf-r4-su4"\n'
        "0X0002C9030000A001   dgx-01 hca   # unquoted, up to the comment\n"
        '\n   0xe09d7303007a4bd8 "dgx-a08-04-01 mlx5_5" # note\n'
        "12 twelve\n"
    )
    assert names == {
        "2c5eab0300b87b40": "leaf-r4-su4",
        "0002c9030000a001": "dgx-01 hca",
        "e09d7303007a4bd8": "dgx-a08-04-01 mlx5_5",
        "000000000000000c": "twelve",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('leaf-1 "0x01"\n', "line 1 'leaf-1 \"0x01\"': 'leaf-1' is not a GUID"),
        (
            '0x01 "a"\n0x1 "b"\n',
            "line 2 '0x1 \"b\"': GUID 0x0000000000000001 is already named 'a' on line 1",
        ),
        ("0x10000000000000000 big\n", "not a 64-bit GUID"),
        ('0x01 ""\n', "has no name"),
    ],
)
def test_bad_node_name_maps_name_the_line(text, message):
    with pytest.raises(FabricFormatError, match=message):
        parse_node_name_map(text)


def test_the_same_name_twice_for_one_guid_is_fine():
    assert parse_node_name_map('0x01 "a"\n0x1 "a"\n') == {"0000000000000001": "a"}
