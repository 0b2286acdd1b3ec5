"""What the captures and fixtures give once applied: every SuperPOD server NIC on the leaf of
its rail, a fabric split in two tiered half by half, `import_fabric` from the command line,
and the per-server findings (absent from the fabric, unbalanced) raised by the findings pass."""

from __future__ import annotations

from collections import Counter
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from fabric.findings import fabric_findings_sync
from fabric.models import Adapter, Fabric, FabricLink, FabricSnapshot, Switch
from fabric.services import fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from findings.choices import FindingType
from findings.models import Finding
from inventory.models import Gpu, Server

from .conftest import FIXTURES, SAMPLES, SUPERPOD, fixture_text

pytestmark = pytest.mark.django_db


def _host_cables(fabric: Fabric) -> dict[int, list[int]]:
    """Adapter id -> the switches its cables up land on (one query)."""
    ends: dict[int, list[int]] = {}
    for a_switch, a_adapter, b_switch, b_adapter in FabricLink.objects.filter(
        fabric=fabric, state="up", gone_at__isnull=True
    ).values_list("a_switch_id", "a_adapter_id", "b_switch_id", "b_adapter_id"):
        if a_switch and b_adapter:
            ends.setdefault(b_adapter, []).append(a_switch)
        elif b_switch and a_adapter:
            ends.setdefault(a_adapter, []).append(b_switch)
    return ends


def test_superpod_every_server_adapter_lands_on_the_leaf_of_its_rail(superpod):
    fabric_snapshot_ingest(fabric_name="sp", raw=superpod)
    fabric = Fabric.objects.get(name="sp")
    switches = {s.pk: s for s in Switch.objects.filter(fabric=fabric)}
    cables = _host_cables(fabric)
    hosts = list(Adapter.objects.filter(fabric=fabric, role="host"))

    assert len(hosts) == 582 - 40  # the SHARP aggregation nodes are no server NICs
    for adapter in hosts:
        (switch_id,) = cables[adapter.pk]  # one cable each, to a leaf
        assert switches[switch_id].tier == 1, adapter.description
    # Every leaf has a rail, and every NIC is on its leaf's rail (the cable is the truth),
    # including the 69 whose description was never set and the management hosts whose NIC
    # names say otherwise.
    assert all(switches[cables[a.pk][0]].rail == a.rail for a in hosts)
    assert Counter(a.rail for a in hosts) == {1: 139, 2: 139, 3: 123, 4: 141}
    # The rail a NIC's label names: none for a NIC without a description; it differs from
    # the leaf's on the one pair of swapped DGX cables the wrong-rail finding names
    # (test_api), and on the UFM host and `ubuntu`, no rail members, which it spares.
    assert sum(1 for a in hosts if a.nic_rail is None) == 69
    named = [a for a in hosts if a.nic_rail is not None]
    assert Counter(a.nic_rail for a in named) == {1: 122, 2: 122, 3: 109, 4: 120}
    off_rail = sorted(
        (a.host_name, a.nic, a.nic_rail, a.rail) for a in named if a.nic_rail != a.rail
    )
    assert off_rail == [
        ("B11-P1-CUFM-02", "mlx5_0", 1, 3),
        ("B11-P1-CUFM-02", "mlx5_1", 2, 4),
        ("b08-p1-dgx-08-c01", "HCA-5", 3, 4),
        ("b08-p1-dgx-08-c01", "HCA-6", 4, 3),
        ("ubuntu", "mlx5_0", 1, 3),
        ("ubuntu", "mlx5_1", 2, 4),
    ]


def test_a_fabric_split_in_two_gets_tiers_in_each_half():
    result = fabric_snapshot_ingest(
        fabric_name="split", raw=fixture_text("ibnetdiscover-p-split.out")
    )
    fabric = Fabric.objects.get(name="split")
    tiers = dict(Switch.objects.filter(fabric=fabric).values_list("name", "tier_inferred"))

    assert tiers == {"north-leaf": 1, "north-spine": 2, "south-leaf": 1, "south-spine": 2}
    assert fabric.summary["tiers"] == {"leaf": 2, "spine": 2}
    assert fabric.summary["untiered_switches"] == 0
    assert fabric.summary["leaf_groups"] == 2  # one per half: nothing joins them
    assert (result.switches, result.ports_down) == (4, 1)
    roles = dict(Adapter.objects.filter(fabric=fabric).values_list("guid", "role"))
    assert roles["0002c9030000c001"] == "router"  # the router is no server NIC
    assert sorted(g for g, r in roles.items() if r == "host") == [
        "506b4b0300000051",
        "506b4b0300000052",
        "506b4b0300000061",
        "506b4b0300000062",
    ]
    south = Switch.objects.get(fabric=fabric, name="south-leaf")
    assert (south.down_gbps, south.up_gbps) == (200.0 + 100.0, 200.0)  # the 2x cable counts half


# -- import_fabric -------------------------------------------------------------------------


def _import(*args: str) -> str:
    out = StringIO()
    call_command("import_fabric", *args, stdout=out)
    return out.getvalue()


def test_import_fabric_reads_a_saved_output_and_its_node_name_map(tmp_path):
    names = tmp_path / "node-name-map"
    names.write_text('# ibnetdiscover --node-name-map\n0x506b4b0300000041 "dgx-04 mlx5_0"\n')

    out = _import(
        "lab", str(FIXTURES / "ibnetdiscover-router-dualport.out"), "--node-name-map", str(names)
    )

    assert "lab: node-name map of 1 names" in out
    assert "lab: ibnetdiscover, 3 switches" in out
    unnamed = Adapter.objects.get(fabric__name="lab", guid="506b4b0300000041")
    assert (unnamed.host_name, unnamed.nic) == ("dgx-04", "mlx5_0")

    out = _import("lab", str(FIXTURES / "ibnetdiscover-p-split.out"))  # -p, detected
    assert "lab: ibnetdiscover-ports, 4 switches" in out


def test_import_fabric_refuses_what_it_cannot_read_and_keeps_the_fabric(tmp_path):
    _import("sp", str(SAMPLES / SUPERPOD))
    links = FabricLink.objects.filter(fabric__name="sp", gone_at__isnull=True).count()
    cut = tmp_path / "cut.out"
    text = (SAMPLES / SUPERPOD).read_bytes()
    cut.write_bytes(text[: len(text) // 2])

    with pytest.raises(CommandError, match="cut short"):
        _import("sp", str(cut))
    with pytest.raises(CommandError, match="no such file"):
        _import("sp", str(tmp_path / "missing.out"))

    assert FabricLink.objects.filter(fabric__name="sp", gone_at__isnull=True).count() == links
    assert list(FabricSnapshot.objects.order_by("id").values_list("status", flat=True)) == [
        "applied",
        "rejected",
    ]


# -- per-server findings through the findings pass ------------------------------------------


def _gpu_server(hostname: str, gpus: int = 8) -> Server:
    server = Server.objects.create(identity=f"hostname:{hostname}", hostname=hostname)
    Gpu.objects.bulk_create(
        Gpu(server=server, index=i, uuid=f"GPU-{hostname}-{i}", name="NVIDIA H100 80GB HBM3")
        for i in range(gpus)
    )
    return server


def _open(type_: str) -> list[Finding]:
    return list(Finding.objects.filter(type=type_, resolved_at__isnull=True))


def test_an_absent_and_an_unbalanced_gpu_server_are_raised_by_the_pass_and_resolved():
    starved = {("gpu00003", 1): "1xHDR", ("gpu00003", 2): "1xHDR"}  # 100 Gb/s for 8 GPUs
    built = synthetic_fabric(servers=8, rails=2, servers_per_leaf=4, slow=starved)
    for host in built.servers:
        _gpu_server(host)
    outside = _gpu_server("gpu00099")  # a peer the fabric never saw
    _gpu_server("cpu-login", gpus=0)  # no GPU: not judged
    fabric_snapshot_ingest(fabric_name="f", raw=built.text)
    fabric_findings_sync(fabric=Fabric.objects.get(name="f"))

    (absent,) = _open(FindingType.FABRIC_SERVER_ABSENT)
    assert (absent.server_id, absent.subject) == (outside.pk, "fabric:f/server:gpu00099")
    assert "8 of its 8 peers" in absent.message
    (unbalanced,) = _open(FindingType.FABRIC_SERVER_UNBALANCED)
    assert unbalanced.server.hostname == "gpu00003"
    assert "12.5 Gb/s of network per GPU" in unbalanced.message and "have 100" in unbalanced.message

    outside.delete()  # gone from the inventory, and the cables run at full rate again
    healthy = synthetic_fabric(servers=8, rails=2, servers_per_leaf=4)
    fabric_snapshot_ingest(fabric_name="f", raw=healthy.text)
    result = fabric_findings_sync(fabric=Fabric.objects.get(name="f"))
    assert not _open(FindingType.FABRIC_SERVER_ABSENT) and not _open(
        FindingType.FABRIC_SERVER_UNBALANCED
    )
    assert result.resolved >= 2
