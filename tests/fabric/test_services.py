"""Applying fabric snapshots and node-name maps: one transaction, idempotent, set-based, and
a refused snapshot leaves the fabric as it was."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric.models import Adapter, Fabric, FabricLink, FabricSnapshot, Switch
from fabric.selectors import fabric_host_bandwidth, fabric_tree
from fabric.services import (
    FabricRejected,
    fabric_rebind,
    fabric_snapshot_ingest,
    node_name_map_set,
    switch_tier_set,
)
from fabric.synthetic import synthetic_fabric
from inventory.models import Server

from .conftest import fixture_text, without_cable

pytestmark = pytest.mark.django_db


def _server(hostname: str, fqdn: str = "") -> Server:
    return Server.objects.create(identity=f"hostname:{hostname}", hostname=hostname, fqdn=fqdn)


def test_superpod_snapshot_is_stored_whole(superpod):
    result = fabric_snapshot_ingest(fabric_name="superpod", raw=superpod)
    fabric = Fabric.objects.get(name="superpod")

    assert (result.switches, result.adapters, result.links_up, result.ports_down) == (
        40,
        582,
        1114,
        0,
    )
    assert Switch.objects.filter(fabric=fabric).count() == 40
    assert Adapter.objects.filter(fabric=fabric).count() == 582
    assert FabricLink.objects.filter(fabric=fabric, state="up").count() == 1114
    snapshot = FabricSnapshot.objects.get(pk=result.snapshot)
    assert snapshot.raw == superpod.decode() and snapshot.status == "applied"
    assert fabric.last_snapshot_id == snapshot.pk
    leaf = Switch.objects.get(fabric=fabric, guid="2c5eab0300b87b40")
    assert (leaf.name, leaf.tier, leaf.port_count, leaf.ports_used) == (
        "A09-P1-IBLEAF-04-04",
        1,
        65,
        17 + 16 + 1,  # 17 servers, 16 spine cables, its aggregation node
    )
    spine = Switch.objects.get(fabric=fabric, name="A10-P1-IBSPINE-02")
    assert spine.tier == 2
    assert fabric.summary["tiers"] == {"leaf": 31, "spine": 9}
    assert Adapter.objects.filter(fabric=fabric, role="aggregation").count() == 40


def test_superpod_rails_and_leaves(superpod):
    fabric_snapshot_ingest(fabric_name="superpod", raw=superpod)
    fabric = Fabric.objects.get(name="superpod")
    rails = {r["rail"]: r for r in fabric.summary["rails"]}

    assert fabric.summary["rail_optimised"] is True
    assert sorted(rails) == [1, 2, 3, 4]
    assert rails[1]["nics"] == ["HCA-1", "mlx5_0"]
    assert rails[4]["nics"] == ["HCA-6", "mlx5_5"]
    assert all(leaf.split("-")[3] == f"0{rail}" for rail in rails for leaf in rails[rail]["leaves"])
    assert len(rails[4]["leaves"]) == 8
    assert fabric.summary["leaf_groups"] == 8  # one per scalable unit (the -01 ... -08 leaves)
    nic = Adapter.objects.get(fabric=fabric, guid="e09d7303007a4bd8")  # a08-p1-dgx-04-c01 mlx5_5
    assert (nic.host_name, nic.nic, nic.rail) == ("a08-p1-dgx-04-c01", "mlx5_5", 4)


def test_the_same_snapshot_twice_changes_nothing(superpod):
    fabric_snapshot_ingest(fabric_name="superpod", raw=superpod)
    before = {
        model: dict(model.objects.values_list("id", "first_seen"))
        for model in (Switch, Adapter, FabricLink)
    }
    again = fabric_snapshot_ingest(fabric_name="superpod", raw=superpod)

    assert (again.added, again.gone) == (0, 0)
    for model, rows in before.items():
        assert dict(model.objects.values_list("id", "first_seen")) == rows
        assert not model.objects.filter(gone_at__isnull=False).exists()


def test_query_count_does_not_grow_with_the_fabric():
    def queries(servers: int) -> int:
        text = synthetic_fabric(servers=servers, rails=4, servers_per_leaf=4).text
        name = f"q{servers}"
        fabric_snapshot_ingest(fabric_name=name, raw=text)  # creates
        with CaptureQueriesContext(connection) as captured:
            fabric_snapshot_ingest(fabric_name=name, raw=text)  # re-applies
        return len(captured)

    assert queries(8) == queries(48)


def test_a_refused_snapshot_keeps_the_last_good_state(superpod):
    fabric_snapshot_ingest(fabric_name="superpod", raw=superpod)
    links = set(FabricLink.objects.values_list("id", "gone_at"))

    with pytest.raises(FabricRejected, match="cut short"):
        fabric_snapshot_ingest(fabric_name="superpod", raw=superpod[: len(superpod) // 2])
    with pytest.raises(FabricRejected, match="no switch"):
        fabric_snapshot_ingest(
            fabric_name="superpod", raw='Ca\t1 "H-506b4b0300000021"\t\t# "dgx-02 mlx5_0"\n'
        )

    assert set(FabricLink.objects.values_list("id", "gone_at")) == links
    statuses = list(FabricSnapshot.objects.order_by("id").values_list("status", flat=True))
    assert statuses == ["applied", "rejected", "rejected"]
    assert "cut short" in FabricSnapshot.objects.filter(status="rejected").order_by("id")[0].error


def test_a_refused_first_snapshot_creates_no_fabric():
    with pytest.raises(FabricRejected):
        fabric_snapshot_ingest(fabric_name="new", raw="hello\n")
    assert not Fabric.objects.exists()


def test_a_bad_fabric_name_is_refused_on_its_field(superpod):
    with pytest.raises(FabricRejected) as caught:
        fabric_snapshot_ingest(fabric_name="Bad Name", raw=superpod)
    assert caught.value.field == "name"


def test_a_cable_that_was_up_and_is_gone():
    built = synthetic_fabric(servers=8, rails=2, servers_per_leaf=4)
    fabric_snapshot_ingest(fabric_name="f", raw=built.text)
    # gpu00003's mlx5_0 loses its cable.
    result = fabric_snapshot_ingest(
        fabric_name="f", raw=without_cable(built.text, "gpu00003 mlx5_0")
    )

    assert result.gone == 2  # the adapter and its cable
    gone = FabricLink.objects.get(gone_at__isnull=False)
    assert gone.b_adapter.description == "gpu00003 mlx5_0" and gone.state == "up"
    assert gone.gone_at == Fabric.objects.get().applied_at
    fabric_snapshot_ingest(fabric_name="f", raw=built.text)
    assert not FabricLink.objects.filter(gone_at__isnull=False).exists()  # back again


def test_binding_by_description_and_what_stays_unbound(superpod):
    dgx = _server("a08-p1-dgx-04-c01", fqdn="a08-p1-dgx-04-c01.cluster.example")
    _server("ubuntu")
    _server("UBUNTU.other.example")  # two servers answer to "ubuntu": neither binds
    result = fabric_snapshot_ingest(fabric_name="superpod", raw=superpod)

    bound = Adapter.objects.filter(server=dgx)
    assert bound.count() == 4
    assert set(bound.values_list("binding_method", flat=True)) == {"description"}
    assert not Adapter.objects.filter(host_name="ubuntu", server__isnull=False).exists()
    assert not Adapter.objects.filter(role="aggregation", server__isnull=False).exists()
    assert result.unbound == 582 - 40 - 4


def test_node_name_map_names_and_binds_past_and_future_snapshots(superpod):
    fabric_snapshot_ingest(fabric_name="superpod", raw=superpod)
    dgx = _server("dgx-b08-08")
    # An adapter whose description was never set, and a leaf, get names from the map.
    result = node_name_map_set(
        fabric_name="superpod",
        raw=b'0xe09d730300858f00 "dgx-b08-08 HCA-6"\n0x2c5eab0300c26540 "leaf-r4-su8"\n',
    )

    assert (result.entries, result.renamed) == (2, 1)
    nic = Adapter.objects.get(guid="e09d730300858f00")
    assert (nic.server, nic.binding_method, nic.host_name, nic.nic) == (
        dgx,
        "node_name_map",
        "dgx-b08-08",
        "HCA-6",
    )
    assert Switch.objects.get(guid="2c5eab0300c26540").name == "leaf-r4-su8"
    fabric_snapshot_ingest(fabric_name="superpod", raw=superpod)  # a later snapshot keeps them
    assert Adapter.objects.get(guid="e09d730300858f00").server == dgx
    assert Switch.objects.get(guid="2c5eab0300c26540").name == "leaf-r4-su8"


def test_a_bad_node_name_map_changes_nothing(superpod):
    fabric_snapshot_ingest(fabric_name="superpod", raw=superpod)
    with pytest.raises(FabricRejected, match="line 2"):
        node_name_map_set(fabric_name="superpod", raw=b'0x01 "a"\nnot a map line\n')
    assert Fabric.objects.get().node_names == {}


def test_rebind_picks_up_servers_that_came_later(superpod):
    fabric_snapshot_ingest(fabric_name="superpod", raw=superpod)
    dgx = _server("b05-p1-dgx-05-c03")
    unbound = fabric_rebind(fabric=Fabric.objects.get())
    assert Adapter.objects.filter(server=dgx).count() == 4
    assert unbound == 582 - 40 - 4


def test_a_tier_override_wins_and_moves_the_tiers_above():
    built = synthetic_fabric(servers=8, rails=2, servers_per_leaf=4, spines_per_pod=2)
    fabric_snapshot_ingest(fabric_name="f", raw=built.text)
    spine = Switch.objects.get(name="spine-p001-01")
    assert spine.tier == 2

    switch_tier_set(switch=spine, tier=3)
    spine.refresh_from_db()
    assert (spine.tier, spine.tier_override, spine.tier_inferred) == (3, 3, 2)
    switch_tier_set(switch=spine, tier=None)
    spine.refresh_from_db()
    assert (spine.tier, spine.tier_override) == (2, None)


def test_leaf_bandwidth_and_oversubscription():
    built = synthetic_fabric(servers=8, rails=2, servers_per_leaf=4, leaf_uplinks=2)
    fabric_snapshot_ingest(fabric_name="f", raw=built.text)
    leaf = Switch.objects.get(name="leaf-su0001-r1")
    assert (leaf.down_gbps, leaf.up_gbps) == (4 * 400.0, 2 * 400.0)  # 2:1 oversubscribed


def test_old_raw_texts_are_emptied_past_the_retention(settings):
    settings.ATLAS_FABRIC_SNAPSHOT_RETENTION = 2
    text = fixture_text("ibnetdiscover-p-split.out")
    for _ in range(4):
        fabric_snapshot_ingest(fabric_name="f", raw=text)
    kept = list(FabricSnapshot.objects.order_by("id").values_list("raw", flat=True))
    assert [bool(raw) for raw in kept] == [False, False, True, True]


def test_the_tree_and_the_bandwidth_cost_the_queries_their_docstrings_say(
    django_assert_num_queries,
):
    built = synthetic_fabric(servers=8, rails=2, servers_per_leaf=4)
    fabric_snapshot_ingest(fabric_name="f", raw=built.text)
    for host in built.servers:
        Server.objects.create(identity=f"hostname:{host}", hostname=host)
    fabric = Fabric.objects.get()
    fabric_rebind(fabric=fabric)

    with django_assert_num_queries(3):  # switches, switch-to-switch links, host cables
        facts, hosts = fabric_tree(fabric)
    assert len(hosts) == 8 and facts.leaf_hosts
    with django_assert_num_queries(3):  # host cables, GPU counts, switch names
        bandwidth = fabric_host_bandwidth(fabric)
    assert len(bandwidth) == 8 and all(b.server_id for b in bandwidth)


def test_plain_rows_inserted_read_back_as_the_model_would_write_them():
    """`insert_rows` skips model instances: choices go in as their values, JSON as JSON,
    and the fields a row leaves out take their defaults."""
    from django.utils import timezone

    from fabric.bulk import insert_rows
    from fabric.choices import NodeKind
    from fabric.models import Adapter, Fabric

    fabric = Fabric.objects.create(name="rows")
    now = timezone.now()
    row = {"fabric_id": fabric.pk, "guid": "00000000000000a1", "first_seen": now}
    insert_rows(
        Adapter,
        [
            {**row, "kind": NodeKind.ROUTER, "port_guids": ["00000000000000b1"], "last_seen": now},
            {**row, "guid": "00000000000000a2", "last_seen": now},
        ],
    )
    router, plain = Adapter.objects.filter(fabric=fabric).order_by("guid")
    assert (router.kind, router.port_guids) == ("router", ["00000000000000b1"])
    assert router.last_seen == now
    assert (plain.kind, plain.port_guids, plain.host_name, plain.server_id) == ("ca", [], "", None)
    assert plain.gone_at is None and plain.role == "host"
