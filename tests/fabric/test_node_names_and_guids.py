"""Node names a fabric can and cannot give (issue 21): node-name maps in every spelling
sites keep, one GUID rule shared with the topology.conf compare, exports that say why a
switch or a whole fabric lists no node, and captures or maps refused without a trace in the
fabric's state. Fixtures: tests/fabric/fixtures/ (a fabric of four adapters whose node
descriptions were never set, maps of it, a site's topology.conf naming adapters by GUID)."""

from __future__ import annotations

from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from clusters.models import Cluster
from fabric.exports import (
    SchedulerTree,
    TreeFacts,
    names_of,
    no_nodes_reason,
    parse_topology_conf,
    scheduler_tree,
    slurm_topology_conf,
)
from fabric.models import Adapter, Fabric, FabricLink, FabricSnapshot, Switch
from fabric.parsers import FabricFormatError, parse_fabric, parse_node_name_map
from fabric.parsers.records import guid_of
from fabric.rules import scheduler_guid_names, scheduler_topology_mismatch
from fabric.services import fabric_snapshot_ingest, node_name_map_set
from findings.models import Finding

from .conftest import FIXTURES, fixture_text

UNNAMED = "ibnetdiscover-unnamed-hosts.out"
VARIANTS = "node-name-map-variants.txt"
BAD_LINE = "node-name-map-bad-line.txt"
SITE_CONF = "topology-guid-named.conf"

A1, A2, B1, B2 = "506b4b03000000a0", "506b4b03000000b0", "506b4b03000000c0", "506b4b03000000d0"
LEAF_A, LEAF_B, SPINE = "0008f10500400001", "0008f10500400002", "0008f10500400003"

VARIANT_NAMES = {
    A1: "gpu-a1 mlx5_0",
    A2: "gpu-a2 mlx5_0",
    B1: "gpu-b1",
    B2: "gpu-b2 mlx5_0",
    LEAF_A: "leaf-a",
    SPINE: "spine-a",
    LEAF_B: "leaf-b",
}


def _leaf_b_map() -> str:
    """The good lines of the bad map: leaf-b's two adapters named, leaf-a's not."""
    return "\n".join(fixture_text(BAD_LINE).splitlines()[:3]) + "\n"


# -- one GUID rule -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "guid"),
    [
        ("0x506b4b03000000a0", A1),
        ("0X506B4B03000000A0", A1),
        ("506b4b03000000a0", A1),
        ("H-506b4b03000000a0", A1),
        ("h-506B4B03000000A0", A1),
        ("S-8f10500400001", LEAF_A),
        ("R-0002c9030000b001", "0002c9030000b001"),
        ("0x1", "0000000000000001"),
        ("0x00000000000000001", "0000000000000001"),
        ("cafe01", None),  # a short bare word is a host name
        ("506b4b03000000a", None),  # 15 bare digits: not ibnetdiscover's spelling
        ("0x10000000000000000", None),  # past 64 bits
        ("gpu-a1", None),
        ("H-", None),
    ],
)
def test_one_rule_reads_every_guid_spelling(text, guid):
    assert guid_of(text) == guid


# -- node-name maps ------------------------------------------------------------------------


def test_every_node_name_map_spelling_sites_keep_is_read():
    text = fixture_text(VARIANTS)

    assert parse_node_name_map(text) == VARIANT_NAMES
    assert parse_node_name_map(text.replace("\n", "\r\n")) == VARIANT_NAMES  # CRLF


def test_a_map_line_not_understood_is_named_by_number_text_and_why():
    with pytest.raises(FabricFormatError) as caught:
        parse_node_name_map(fixture_text(BAD_LINE))

    message = str(caught.value)
    assert message.startswith("line 4 'gpu-b3\\t0x506b4b03000000e0': 'gpu-b3' is not a GUID")
    assert 'expected 0x<guid> "name"' in message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("\x1b[31m" + "x" * 200 + " name\n", "line 1 '\\x1b[31m" + "x" * 54 + "…': "),
        ("0123 dgx-01\n", "'0123' is ambiguous"),
        ("99999999999999999999 dgx-01\n", "past 64 bits"),
        ("H-506b4b03000000a0\n", "has no name"),
    ],
)
def test_a_refused_line_is_quoted_escaped_and_short(text, message):
    with pytest.raises(FabricFormatError) as caught:
        parse_node_name_map(text)
    assert message in str(caught.value)
    assert len(str(caught.value)) < 300


def test_a_decimal_guid_is_read_as_the_c_tools_read_it():
    assert parse_node_name_map("12 twelve\n") == {"000000000000000c": "twelve"}


# -- exports that say why ------------------------------------------------------------------


def _facts(unnamed_on_a: bool = True) -> TreeFacts:
    return TreeFacts(
        switches={
            "la": ("leaf-a", 1),
            "lb": ("leaf-b", 1),
            "s": ("spine-a", 2),
            "x": ("lost", None),
        },
        switch_links=[("la", "s"), ("lb", "s")],
        leaf_hosts={"la": {f"g{A1}", f"g{A2}"}, "lb": {"h1", "h2", f"g{B2}"}},
        unnamed={f"g{A1}": A1, f"g{A2}": A2, f"g{B2}": B2},
    )


def test_switches_left_out_or_listed_short_are_said_in_comments():
    tree, notes = scheduler_tree(_facts(), {"h1": "n1", "h2": "n2"})

    assert tree.nodes == {"leaf-b": ["n1", "n2"]}
    assert tree.children == {"spine-a": ["leaf-b"]}
    text = slurm_topology_conf(tree, notes, "header")
    comments = [line for line in text.splitlines() if line.startswith("# ")]
    assert comments[1].startswith(
        f"# leaf-a: not listed: its 2 host adapter(s) are known by GUID alone (0x{A1}, 0x{A2}): "
    )
    assert comments[2] == (
        f"# leaf-b: 1 host adapter(s) known by GUID alone are left out (0x{B2}): no node-name "
        "map entry, node description or bound server names them"
    )
    assert comments[3] == "# lost: not listed: no tier (no leaf switch reaches it)"
    assert parse_topology_conf(text).nodes == tree.nodes  # still a topology.conf Slurm reads


def test_a_tree_with_no_node_says_why_and_names_the_guids():
    tree, _ = scheduler_tree(_facts(), {})

    assert tree.nodes == {} and tree.unnamed == [A1, A2, B2]
    assert [switch for switch, _ in tree.unlisted] == ["leaf-a", "leaf-b", "spine-a", "lost"]
    reason = no_nodes_reason(tree, "ib0")
    assert reason.startswith("fabric ib0 has no node Slurm can be given: its 3 host adapter(s)")
    assert f"0x{A1}" in reason and "/api/v1/fabrics/ib0/node-name-map/" in reason


# -- the compare, by GUID ------------------------------------------------------------------


def test_guid_spelled_nodes_are_read_as_the_fabric_knows_the_adapters():
    site = parse_topology_conf(f"SwitchName=a Nodes=0x{A1},{A2[:-1]}1,H-{B1},0x506b4b03000000ff\n")
    adapters = {A1: (A1, ""), f"{A2[:-1]}1": (A2, ""), A2: (A2, ""), B1: (B1, "gpu-b1")}

    tree, found = scheduler_guid_names("hpc", site, adapters)

    assert tree.nodes == {"a": sorted([f"0x{A1}", f"0x{A2}", "gpu-b1", "0x506b4b03000000ff"])}
    (by_guid,) = found
    assert by_guid.subject == "cluster:hpc/topology/by-guid"
    assert f"H-{B1} is gpu-b1" in by_guid.message
    discovered = SchedulerTree(nodes={"leaf-a": [f"0x{A1}", f"0x{A2}", "gpu-b1"]})
    (unknown,) = scheduler_topology_mismatch("hpc", tree, discovered)
    assert unknown.message == (
        "hpc's topology places 1 GUID(s) no host adapter on the fabric carries: 0x506b4b03000000ff"
    )


def test_names_in_messages_keep_guids_whole():
    assert names_of(["n2", f"0x{A2}", "n1", f"0x{A1}"]) == f"n[1-2],0x{A1},0x{A2}"


# -- through the API and the command line ------------------------------------------------

SNAPSHOTS = "/api/v1/fabrics/{}/snapshots/"
MAP = "/api/v1/fabrics/{}/node-name-map/"


def _put_map(client, name: str, body: str):
    return client.generic("PUT", MAP.format(name), body, content_type="text/plain")


def _import(*args: str) -> str:
    out = StringIO()
    call_command("import_fabric", *args, stdout=out)
    return out.getvalue()


def _state(name: str) -> tuple:
    """What a fabric holds: its map and names, live switches with names, live cables, and
    its last applied snapshot."""
    fabric = Fabric.objects.get(name=name)
    return (
        fabric.node_name_map,
        fabric.node_names,
        fabric.last_snapshot_id,
        sorted(Switch.objects.filter(fabric=fabric, gone_at=None).values_list("guid", "name")),
        sorted(
            FabricLink.objects.filter(fabric=fabric, gone_at=None).values_list("key", flat=True)
        ),
        sorted(Adapter.objects.filter(fabric=fabric).values_list("guid", "host_name", "nic")),
    )


@pytest.mark.django_db
def test_a_map_in_every_spelling_names_and_binds_through_the_api(staff_api):
    fabric_snapshot_ingest(fabric_name="ib0", raw=fixture_text(UNNAMED))

    response = _put_map(staff_api, "ib0", fixture_text(VARIANTS))

    assert response.status_code == 200, response.content
    assert response.json()["entries"] == 7 and response.json()["renamed"] == 0
    hosts = dict(Adapter.objects.values_list("guid", "host_name"))
    assert hosts == {A1: "gpu-a1", A2: "gpu-a2", B1: "gpu-b1", B2: "gpu-b2"}


@pytest.mark.django_db
def test_a_map_with_one_bad_line_is_a_field_level_400_and_changes_nothing(staff_api):
    fabric_snapshot_ingest(fabric_name="ib0", raw=fixture_text(UNNAMED))
    node_name_map_set(fabric_name="ib0", raw=fixture_text(VARIANTS))
    before = _state("ib0")

    response = _put_map(staff_api, "ib0", fixture_text(BAD_LINE))

    assert response.status_code == 400
    (message,) = response.json()["errors"]["body"]
    assert message.startswith("line 4 'gpu-b3\\t0x506b4b03000000e0': 'gpu-b3' is not a GUID")
    assert _state("ib0") == before


@pytest.mark.django_db
def test_import_fabric_refuses_a_bad_map_and_changes_nothing(tmp_path):
    bad = tmp_path / "node-name-map"
    bad.write_text(fixture_text(BAD_LINE))

    with pytest.raises(CommandError, match="line 4 'gpu-b3"):
        _import("ib0", str(FIXTURES / UNNAMED), "--node-name-map", str(bad))
    assert not Fabric.objects.exists()  # a new fabric is not created

    _import("ib0", str(FIXTURES / UNNAMED), "--node-name-map", str(FIXTURES / VARIANTS))
    before = _state("ib0")
    with pytest.raises(CommandError, match=f"{bad}: line 4"):
        _import("ib0", str(FIXTURES / UNNAMED), "--node-name-map", str(bad))
    assert _state("ib0") == before
    assert FabricSnapshot.objects.count() == 1


def _cut_in_a_port_list(text: str) -> str:
    """The capture cut at a line end in the middle of the second switch's port list."""
    second = text.index("\nSwitch\t", text.index("\nSwitch\t") + 1)
    return text[: text.index("\n[2]", second) + 1]


@pytest.mark.django_db
def test_import_fabric_with_a_capture_cut_in_a_port_list_changes_nothing(tmp_path):
    cut = tmp_path / "cut.out"
    cut.write_text(_cut_in_a_port_list(fixture_text(UNNAMED)))
    with pytest.raises(FabricFormatError, match="cut short"):
        parse_fabric(cut.read_text())
    names = str(FIXTURES / VARIANTS)

    with pytest.raises(CommandError, match="cut short"):
        _import("ib0", str(cut), "--node-name-map", names)
    assert not Fabric.objects.exists()  # neither the map nor the capture made a fabric

    _import("ib0", str(FIXTURES / UNNAMED))
    before = _state("ib0")
    with pytest.raises(CommandError, match="cut short"):
        _import("ib0", str(cut), "--node-name-map", names)
    assert _state("ib0") == before  # the map that came with it was not set either
    statuses = list(FabricSnapshot.objects.order_by("id").values_list("status", flat=True))
    assert statuses == ["applied", "rejected"]  # the refusal is on record, as a push's is


@pytest.mark.django_db
def test_a_pushed_capture_cut_in_a_port_list_is_a_400_and_changes_nothing(staff_api):
    text = fixture_text(UNNAMED)
    fabric_snapshot_ingest(fabric_name="ib0", raw=text)
    before = _state("ib0")

    response = staff_api.generic(
        "POST", SNAPSHOTS.format("ib0"), _cut_in_a_port_list(text), content_type="text/plain"
    )

    assert response.status_code == 400
    assert "cut short" in response.json()["errors"]["body"][0]
    assert _state("ib0") == before


@pytest.mark.django_db
def test_a_fabric_with_no_nameable_host_gets_409_with_the_reason(staff_api, api):
    fabric_snapshot_ingest(fabric_name="ib0", raw=fixture_text(UNNAMED))

    for export in ("topology.conf", "topology.yaml"):
        response = api.get(f"/api/v1/fabrics/ib0/{export}")
        assert response.status_code == 409, export
        body = response.json()
        assert body["detail"].startswith("fabric ib0 has no node Slurm can be given: its 4 host")
        assert f"0x{A1}" in body["detail"] and "node-name map" in body["detail"]
        assert [u["switch"] for u in body["unlisted"]] == ["leaf-a", "leaf-b", "spine-a"]
        assert "known by GUID alone" in body["unlisted"][0]["reason"]


@pytest.mark.django_db
def test_switches_without_a_nameable_node_are_named_in_comments(staff_api, api):
    fabric_snapshot_ingest(fabric_name="ib0", raw=fixture_text(UNNAMED))
    node_name_map_set(fabric_name="ib0", raw=_leaf_b_map())

    conf = api.get("/api/v1/fabrics/ib0/topology.conf")
    assert conf.status_code == 200 and conf["Content-Type"].startswith("text/plain")
    text = conf.content.decode()
    assert [line for line in text.splitlines() if not line.startswith("#")] == [
        "SwitchName=leaf-b Nodes=gpu-b[1-2]",
        "SwitchName=spine-a Switches=leaf-b",
    ]
    expected = (
        f"# leaf-a: not listed: its 2 host adapter(s) are known by GUID alone (0x{A1}, 0x{A2})"
    )
    assert expected in text

    document = api.get("/api/v1/fabrics/ib0/topology.yaml").content.decode()
    assert expected in document
    assert yaml.safe_load(document)[0]["tree"]["switches"][0] == {
        "switch": "leaf-b",
        "nodes": "gpu-b[1-2]",
    }


@pytest.mark.django_db
def test_a_site_topology_conf_naming_adapters_by_guid_agrees(staff_api):
    fabric_snapshot_ingest(fabric_name="ib0", raw=fixture_text(UNNAMED))
    node_name_map_set(fabric_name="ib0", raw=_leaf_b_map())
    Cluster.objects.create(name="hpc", kind="slurm")
    url = "/api/v1/clusters/hpc/topology/?fabric=ib0"

    agrees = staff_api.generic("POST", url, fixture_text(SITE_CONF), content_type="text/plain")

    assert agrees.status_code == 200, agrees.content
    assert (agrees.json()["agrees"], agrees.json()["findings"]) == (True, [])

    # By GUID an adapter the fabric names, a GUID it lacks, and one adapter on the wrong leaf.
    wrong = (
        f"SwitchName=x Nodes=H-{A1},gpu-b1\nSwitchName=y Nodes=0x{A2},H-{B2},0x506b4b03000000ff\n"
    )
    found = staff_api.generic("POST", url, wrong, content_type="text/plain").json()["findings"]
    messages = {f["subject"].rsplit("/", 1)[1]: f["message"] for f in found}
    assert messages["by-guid"] == (
        f"hpc's topology names 1 node(s) by the GUID of an adapter the fabric knows by name: "
        f"H-{B2} is gpu-b2"
    )
    assert messages["unknown"] == (
        "hpc's topology places 1 GUID(s) no host adapter on the fabric carries: 0x506b4b03000000ff"
    )
    assert "not show" not in " ".join(messages.values())
    assert messages["switch:x"] == (
        f"hpc's switch x holds nodes that sit on 2 different leaves "
        f"(leaf-a: 0x{A1}; leaf-b: gpu-b1)"
    )
    assert Finding.objects.filter(subject="cluster:hpc/topology/by-guid").exists()
