"""Fabric pages: the fabric page (figures and switch list), a switch's ports, the server
page's fabric part and the overview's card; sign-in required, queries that do not grow."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric.figures import FabricFigureFacts
from fabric.findings import fabric_findings_sync
from fabric.models import Fabric, Switch
from fabric.services import fabric_rebind, fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


def _fabric(servers: int, name: str = "ib", **kwargs) -> dict:
    built = synthetic_fabric(servers=servers, rails=2, servers_per_leaf=4, **kwargs)
    fabric_snapshot_ingest(fabric_name=name, raw=built.text)
    found = apply_reports(*(make_report(host, gpus=4, nics=1) for host in built.servers))
    fabric = Fabric.objects.get(name=name)
    fabric_rebind(fabric=fabric)
    fabric_findings_sync(fabric=fabric)
    return found


def _hovers(figure: dict) -> str:
    """Every hover text of a figure: its markers' and, in a rail grid, its cells'."""
    found = []
    for trace in figure["data"]:
        if trace["type"] == "heatmap":
            found += [cell for row in trace["customdata"] for cell in row]
        else:
            found += trace.get("text", [])
    return " ".join(found)


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def test_fabric_pages_need_sign_in(client):
    _fabric(4)
    switch = Switch.objects.first()
    for url in ("/fabric/", f"/fabric/switches/{switch.pk}/"):
        assert client.get(url).status_code == 302


def test_the_fabric_page_draws_each_fabric_and_lists_its_switches(signed_in):
    _fabric(8, slow={("gpu00002", 1): "4xHDR"})
    page = signed_in.get("/fabric/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'href="/fabric/"' in text and 'aria-current="page">Fabric<' in text
    assert "leaf-su0001-r1" in text and 'id="switches"' in text
    figure = json.loads(re.search(r'id="figure-ib-data"[^>]*>(.*?)</script>', text, re.S)[1])
    assert figure["layout"]["meta"]["level"] == "detail"
    hovers = _hovers(figure)
    assert "4xHDR" in hovers and "(degraded)" in hovers  # the open finding, marked


def test_the_switch_page_lists_its_ports_with_links_to_servers(signed_in):
    found = _fabric(8)
    leaf = Switch.objects.get(name="leaf-su0001-r1")
    page = signed_in.get(f"/fabric/switches/{leaf.pk}/")
    text = page.content.decode()
    assert page.status_code == 200
    assert f'href="/servers/{found["gpu00001"].pk}/"' in text
    assert "spine-p001-01" in text and "4xNDR" in text
    assert signed_in.get("/fabric/switches/999999/").status_code == 404


def test_the_server_page_shows_each_nic_switch_port_rail_and_labels(signed_in):
    found = _fabric(8)
    text = signed_in.get(f"/servers/{found['gpu00005'].pk}/").content.decode()
    assert 'id="server-fabric-ib"' in text
    assert "leaf-su0002-r1" in text and "leaf-su0002-r2" in text
    assert "network.topology.nvidia.com/leaf=leaf-su0002-r1" in text
    assert "network.topology.nvidia.com/spine=" in text


def test_the_overview_card_counts_switches_cables_and_network_per_gpu(signed_in):
    _fabric(8)
    text = signed_in.get("/").content.decode()
    card = text.split('id="fabric-card"')[1].split("</section>")[0]
    # 2 NDR NICs (400 Gb/s each) for 4 GPUs: 200 Gb/s per GPU.
    assert "200 Gb/s per GPU" in card and ">ib<" in card


def test_page_queries_do_not_grow_with_the_fabric(signed_in):
    def queries(url_of, servers: int, name: str) -> int:
        found = _fabric(servers, name=name, host_format=name + "-gpu{:05d}")
        with CaptureQueriesContext(connection) as captured:
            assert signed_in.get(url_of(found, name)).status_code == 200
        return len(captured)

    pages = {
        "fabric": lambda found, name: f"/fabric/?fabric={name}",
        "switch": lambda found, name: (
            f"/fabric/switches/{Switch.objects.get(fabric__name=name, name='leaf-su0001-r1').pk}/"
        ),
        "server": lambda found, name: f"/servers/{next(iter(found.values())).pk}/",
    }
    for page, url_of in pages.items():
        Fabric.objects.all().delete()
        small = queries(url_of, 4, f"{page}-a")
        Fabric.objects.all().delete()
        large = queries(url_of, 16, f"{page}-b")
        assert small == large, page


def test_the_fabric_page_costs_the_same_queries_for_one_fabric_or_three(signed_in):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            page = signed_in.get("/fabric/")
        assert page.status_code == 200
        return len(captured)

    _fabric(4, name="ib-a", host_format="a-gpu{:05d}")
    one = queries()
    _fabric(8, name="ib-b", host_format="b-gpu{:05d}")
    _fabric(4, name="ib-c", host_format="c-gpu{:05d}", slow={("c-gpu00002", 1): "4xHDR"})
    three = queries()
    assert one == three
    text = signed_in.get("/fabric/").content.decode()
    for name in ("ib-a", "ib-b", "ib-c"):
        assert f'id="figure-{name}-data"' in text
    figure = json.loads(re.search(r'id="figure-ib-c-data"[^>]*>(.*?)</script>', text, re.S)[1])
    hovers = _hovers(figure)
    assert "(degraded)" in hovers  # each fabric's own findings, read in the one query
    figure = json.loads(re.search(r'id="figure-ib-a-data"[^>]*>(.*?)</script>', text, re.S)[1])
    hovers = _hovers(figure)
    assert "(degraded)" not in hovers


def test_a_large_fabric_is_drawn_at_switch_level_beside_a_small_one_in_detail(signed_in):
    def figure_of(text: str, name: str) -> dict:
        found = re.search(rf'id="figure-{name}-data"[^>]*>(.*?)</script>', text, re.S)
        return json.loads(found[1])

    big = synthetic_fabric(servers=720, rails=2, servers_per_leaf=16, host_format="big{:05d}")
    fabric_snapshot_ingest(fabric_name="big", raw=big.text)
    _fabric(4, name="small", host_format="small{:05d}")
    text = signed_in.get("/fabric/").content.decode()
    large, small = figure_of(text, "big"), figure_of(text, "small")
    assert large["layout"]["meta"]["level"] == "switches"
    assert small["layout"]["meta"]["level"] == "detail"
    hovers = " ".join(t for trace in large["data"] for t in trace.get("text", []))
    assert "16 servers" in hovers  # each leaf's servers, folded into it


def test_the_overview_card_costs_the_same_queries_for_one_fabric_or_three(signed_in):
    from fabric.selectors import fabric_cards

    def cost() -> tuple[int, list]:
        with CaptureQueriesContext(connection) as captured:
            cards = fabric_cards()
        return len(captured), cards

    _fabric(4, name="ib-a", host_format="a-gpu{:05d}")
    one, _ = cost()
    _fabric(4, name="ib-b", host_format="b-gpu{:05d}")
    _fabric(8, name="ib-c", host_format="c-gpu{:05d}")
    three, cards = cost()
    assert one == three == 4
    by_name = {card.name: card for card in cards}
    # 2 NDR NICs (400 Gb/s each) for 4 GPUs on every server: 200 Gb/s per GPU.
    assert by_name["ib-c"].by_model == [("DGXH100", 8, 200.0)]
    assert by_name["ib-a"].by_model == [("DGXH100", 4, 200.0)]
    text = signed_in.get("/").content.decode()
    assert ">ib-b<" in text.split('id="fabric-card"')[1].split("</section>")[0]


def test_the_switch_level_aggregates_summed_in_sql_draw_what_every_cable_read_draws():
    """At switch level the page sums cables in SQL (leaf loads, switch-pair bundles); read
    one by one and folded in Python (`figures.trunk_bundles`), the same fabric gives the
    same facts and the same figure: up, degraded, down and gone cables of both kinds."""
    from fabric.choices import LinkState
    from fabric.figures import fabric_figure, trunk_bundles
    from fabric.models import FabricLink
    from fabric.selectors import fabric_figure_facts, fabrics_degraded_keys
    from fabric.selectors.figure import _cables, _host_cables, _trunks

    built = synthetic_fabric(
        servers=720, rails=2, servers_per_leaf=16, slow={("gpu00003", 1): "4xHDR"}
    )
    fabric_snapshot_ingest(fabric_name="big", raw=built.text)
    fabric = Fabric.objects.get(name="big")
    trunks = FabricLink.objects.filter(fabric=fabric, b_switch__isnull=False).order_by("key")
    slow, down, gone = (trunk.pk for trunk in trunks[:3])
    FabricLink.objects.filter(pk=slow).update(width="4x", lane_speed="HDR", gbps=200.0)
    FabricLink.objects.filter(pk=down).update(state=LinkState.DOWN, gbps=None)
    FabricLink.objects.filter(pk=gone).update(gone_at=fabric.applied_at)
    edge = FabricLink.objects.filter(fabric=fabric, b_adapter__isnull=False).order_by("key")
    FabricLink.objects.filter(pk=edge[0].pk).update(state=LinkState.DOWN, gbps=None)
    fabric_findings_sync(fabric=fabric)
    fabric.refresh_from_db()
    assert len(fabrics_degraded_keys([fabric.name])[fabric.name]) == 2  # HDR cable and trunk
    assert fabrics_degraded_keys(["bi", "bigger"]) == {}  # another fabric's are not its

    summed = fabric_figure_facts(fabric)
    assert summed.bundles is not None and summed.leaf_loads is not None
    degraded = {fabric.pk: fabrics_degraded_keys([fabric.name])[fabric.name]}
    every = _trunks(_cables([fabric.pk]), degraded)[fabric.pk]
    hosts, marks = _host_cables(_cables([fabric.pk]).filter(b_switch__isnull=True), degraded)
    read = FabricFigureFacts(
        fabric.name, summed.switches, list(hosts[fabric.pk].values()), every + marks[fabric.pk]
    )
    assert list(summed.bundles) == trunk_bundles(every)
    # the down and the gone trunk, the slow one: each in its pair of switches
    assert sum(b.down for b in summed.bundles) == 2
    assert sum(b.degraded for b in summed.bundles) == 1
    assert sum(load.down for load in summed.leaf_loads.values()) == 1
    assert sum(load.degraded for load in summed.leaf_loads.values()) == 1
    figure = fabric_figure(summed)
    assert figure["layout"]["meta"]["level"] == "switches"
    assert figure == fabric_figure(read)


def _figure_in(text: str, name: str) -> dict:
    return json.loads(re.search(rf'id="figure-{name}-data"[^>]*>(.*?)</script>', text, re.S)[1])


def test_a_folded_figure_is_stored_at_its_revision_and_read_back_without_a_cable(signed_in):
    from fabric.models import FabricFigure

    big = synthetic_fabric(servers=720, rails=2, servers_per_leaf=16, host_format="big{:05d}")
    fabric_snapshot_ingest(fabric_name="big", raw=big.text)
    _fabric(4, name="small", host_format="small{:05d}")
    drawn = _figure_in(signed_in.get("/fabric/").content.decode(), "big")
    stored = FabricFigure.objects.get(fabric__name="big")
    assert stored.figure == drawn and drawn["layout"]["meta"]["level"] == "switches"
    assert not FabricFigure.objects.filter(fabric__name="small").exists()  # drawn per request

    assert _figure_in(signed_in.get("/fabric/").content.decode(), "big") == drawn
    Fabric.objects.filter(name="small").delete()  # (which is drawn in detail, from its cables)
    with CaptureQueriesContext(connection) as captured:
        text = signed_in.get("/fabric/").content.decode()
    assert _figure_in(text, "big") == drawn
    assert not [q for q in captured if '"fabric_fabriclink"' in q["sql"]]


def test_a_stored_figure_is_drawn_again_when_the_fabric_or_its_findings_move(signed_in):
    from fabric.models import FabricFigure

    big = synthetic_fabric(servers=720, rails=2, servers_per_leaf=16, host_format="big{:05d}")
    fabric_snapshot_ingest(fabric_name="big", raw=big.text)
    signed_in.get("/fabric/")
    marked = {"data": [], "layout": {"meta": {"level": "marked"}}}
    FabricFigure.objects.update(figure=marked)
    assert _figure_in(signed_in.get("/fabric/").content.decode(), "big") == marked

    # an open finding marks a cable degraded: the figure's key moves with it
    slow = synthetic_fabric(
        servers=720,
        rails=2,
        servers_per_leaf=16,
        host_format="big{:05d}",
        slow={("big00003", 1): "4xHDR"},
    )
    fabric_snapshot_ingest(fabric_name="big", raw=slow.text)
    FabricFigure.objects.update(figure=marked)  # as if drawn at the new revision, before
    fabric = Fabric.objects.get(name="big")
    fabric_findings_sync(fabric=fabric)
    figure = _figure_in(signed_in.get("/fabric/").content.decode(), "big")
    assert figure["layout"]["meta"]["level"] == "switches"
    hovers = _hovers(figure)
    assert "1 degraded" in hovers

    # a new snapshot (any change to the fabric) moves the revision
    FabricFigure.objects.update(figure=marked)
    fabric_snapshot_ingest(fabric_name="big", raw=big.text)
    assert _figure_in(signed_in.get("/fabric/").content.decode(), "big") != marked


def test_the_worker_renders_the_figure_after_the_findings_pass():
    from fabric import tasks
    from fabric.models import FabricFigure
    from fabric.render import fabric_figures

    big = synthetic_fabric(servers=720, rails=2, servers_per_leaf=16)
    fabric_snapshot_ingest(fabric_name="big", raw=big.text)
    fabric = Fabric.objects.get(name="big")
    tasks.sync_fabric_findings(fabric.pk)
    stored = FabricFigure.objects.get(fabric=fabric)
    with CaptureQueriesContext(connection) as captured:
        assert fabric_figures([fabric]) == {fabric.pk: stored.figure}
    assert len(captured) == 3  # the revision, the degraded cables, the stored figure


def test_after_one_fabric_changes_the_worker_leaves_every_stored_figure_fresh():
    """A figure is stamped with the fabric revision, which any fabric's change moves: the
    worker draws every stale one again, not only the changed fabric's, so no page has to."""
    from fabric import tasks
    from fabric.models import FabricFigure
    from inventory.services import revision_get

    def built(name: str, **slow) -> str:
        return synthetic_fabric(
            servers=720, rails=2, servers_per_leaf=16, host_format=f"{name}{{:05d}}", **slow
        ).text

    for name in ("one", "two"):
        fabric_snapshot_ingest(fabric_name=name, raw=built(name))
    tasks.sync_all_fabric_findings()
    fabric_snapshot_ingest(fabric_name="one", raw=built("one", slow={("one00003", 1): "4xHDR"}))
    tasks.sync_fabric_findings(Fabric.objects.get(name="one").pk)
    now = f"f{revision_get(name='fabric')}."
    stored = dict(FabricFigure.objects.values_list("fabric__name", "revision"))
    assert set(stored) == {"one", "two"}
    assert all(revision.startswith(now) for revision in stored.values()), (now, stored)
