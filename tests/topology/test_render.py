"""Fleet figures rendered once per data revision, served by the API; server figures per request."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.template.loader import render_to_string
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from config.celery import app as celery_app
from inventory.choices import GpuStatus
from inventory.models import Gpu, MigDevice, Server
from inventory.selectors import server_detail
from tests.nodes import k8s_node, k8s_node_list, scontrol_node, scontrol_text
from tests.reports import apply_reports, make_report
from topology import tasks
from topology.models import RenderedFigure
from topology.render import (
    FLEET_FIGURES,
    fleet_figures_stale,
    fleet_render,
    fleet_revision,
    server_figures,
)
from topology.selectors import fleet_rows

from .test_figures import EVIL_GPU, EVIL_HOST, assert_escaped, sankey_links, strings

pytestmark = pytest.mark.django_db

FIGURES = sorted(FLEET_FIGURES)


@pytest.fixture(autouse=True)
def _fresh_render_requests():
    cache.delete(tasks.RENDER_REQUESTED_KEY)
    yield
    cache.delete(tasks.RENDER_REQUESTED_KEY)


def build_fleet(n: int, *, gpus: int = 2, mig: bool = True, prefix: str = "gpu") -> dict:
    """n servers with agents; even ones Kubernetes nodes (by system UUID), odd ones Slurm
    nodes (by hostname); the last one in no scheduler; one node without an agent."""
    reports = [
        make_report(
            f"{prefix}-{i:03d}",
            gpus=gpus,
            nics=1,
            mig_gpus={0: ["3g.40gb", "2g.20gb"]} if mig and i == 0 else None,
        )
        for i in range(n)
    ]
    servers = apply_reports(*reports)
    for i, report in enumerate(reports):  # racks are set by people, not agents
        Server.objects.filter(hostname=report["host"]["hostname"]).update(
            rack=f"r{i // 4 + 1:02d}", rack_position=1 + 2 * (i % 4)
        )
    scheduled = reports[:-1] if n > 1 else reports
    k8s = [r for i, r in enumerate(scheduled) if i % 2 == 0]
    slurm = [r for i, r in enumerate(scheduled) if i % 2 == 1]
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(
            *(
                k8s_node(r["host"]["hostname"], system_uuid=r["host"]["system_uuid"], gpus=gpus)
                for r in k8s
            ),
            k8s_node("ghost-01", system_uuid="00000000-0000-0000-0000-00000000dead"),
        ),
    )
    if slurm:
        snapshot_ingest(
            cluster_name="hpc",
            raw=scontrol_text(
                *(scontrol_node(r["host"]["hostname"], gres=f"gpu:h100:{gpus}") for r in slurm)
            ),
        )
    reconcile_all()
    return servers


def cached() -> dict[str, RenderedFigure]:
    return {row.name: row for row in RenderedFigure.objects.all()}


# Rendering ------------------------------------------------------------------------------


def test_render_caches_every_fleet_figure_under_the_current_revision():
    build_fleet(4)
    assert fleet_figures_stale() == list(FLEET_FIGURES)
    assert sorted(fleet_render()) == FIGURES
    rows = cached()
    assert sorted(rows) == FIGURES
    revision = fleet_revision()
    assert {row.revision for row in rows.values()} == {revision}
    hierarchy = rows["fleet-hierarchy"].figure
    assert hierarchy["data"][0]["values"][0] == Gpu.objects.count() == 8
    links = sankey_links(rows["server-node-map"].figure)
    assert ("gpu-000", "prod/gpu-000", 1) in links
    assert ("gpu-001", "hpc/gpu-001", 1) in links
    assert ("gpu-003", "no scheduler", 1) in links
    assert ("no agent", "prod/ghost-01", 1) in links
    assert rows["racks"].figure["layout"]["meta"]["empty"] is False
    assert all(row.duration_ms >= 0 and row.rendered_at for row in rows.values())


def test_nothing_renders_again_until_the_inventory_or_the_nodes_change():
    build_fleet(3)
    fleet_render()
    first = cached()
    assert fleet_render() == []
    assert fleet_figures_stale() == []

    apply_reports(make_report("gpu-new", gpus=4, nics=1))  # the inventory moved
    assert fleet_figures_stale() == list(FLEET_FIGURES)
    assert sorted(fleet_render()) == FIGURES
    second = cached()
    assert second["fleet-hierarchy"].revision != first["fleet-hierarchy"].revision
    assert second["fleet-hierarchy"].figure["data"][0]["values"][0] == 10
    assert fleet_render() == []

    # a node set changes; its binding lands in the reconciliation after it
    report = make_report("gpu-new", gpus=4, nics=1)
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(k8s_node("gpu-new", system_uuid=report["host"]["system_uuid"])),
        confirm_shrink=True,  # one node replaces three: confirmed, else held
    )
    assert fleet_figures_stale() == list(FLEET_FIGURES)
    fleet_render()
    reconcile_all()
    assert fleet_figures_stale() == list(FLEET_FIGURES)
    fleet_render()
    assert ("gpu-new", "prod/gpu-new", 1) in sankey_links(cached()["server-node-map"].figure)


def test_force_renders_even_when_nothing_changed():
    build_fleet(2)
    fleet_render()
    assert sorted(fleet_render(force=True)) == FIGURES
    assert fleet_render(names=["racks"], force=True) == ["racks"]
    with pytest.raises(ValueError, match="unknown fleet figure"):
        fleet_render(names=["nope"])


def test_the_task_returns_at_once_when_nothing_changed(django_assert_num_queries):
    build_fleet(2)
    assert set(tasks.render_fleet_figures().split(",")) == set(FIGURES)
    with django_assert_num_queries(4):  # as its docstring says
        assert tasks.render_fleet_figures() == "unchanged"


def test_beat_runs_the_render_every_30_seconds():
    entry = settings.CELERY_BEAT_SCHEDULE["render-fleet-figures"]
    assert entry["task"] == "topology.tasks.render_fleet_figures"
    assert entry["schedule"] == 30
    assert celery_app.tasks[entry["task"]].name == tasks.render_fleet_figures.name


# Reads ----------------------------------------------------------------------------------


def test_fleet_rows_cost_the_same_queries_for_5_and_100_servers():
    build_fleet(5)
    with CaptureQueriesContext(connection) as small:
        rows = fleet_rows()
    assert len(rows["servers"]) == 5
    build_fleet(100, gpus=1, mig=False, prefix="big")
    with CaptureQueriesContext(connection) as large:
        rows = fleet_rows()
    assert len(rows["servers"]) == 105
    assert len(small) == len(large) == 5  # servers, GPUs, MIG devices, nodes, findings


def test_fleet_rows_match_the_inventory_and_leave_lost_gpus_out():
    build_fleet(3)
    Gpu.objects.filter(server__hostname="gpu-002", index=1).update(status=GpuStatus.LOST)
    rows = fleet_rows()
    live = Gpu.objects.exclude(status=GpuStatus.LOST)
    assert sum(r["count"] for r in rows["gpus"]) == live.count() == 5
    assert sum(r["mig_count"] for r in rows["gpus"]) == 1
    assert sum(r["count"] for r in rows["mig_devices"]) == MigDevice.objects.count() == 2
    assert {n["cluster"] for n in rows["nodes"]} == {"prod", "hpc"}
    assert {s["rack"] for s in rows["servers"]} == {"r01"}
    assert {s["state"] for s in rows["servers"]} == {"online"}


# The API --------------------------------------------------------------------------------


@pytest.fixture
def with_broker(monkeypatch):
    """A deployment with a broker: tasks are sent, not run; what was sent is recorded."""
    sent: list[dict] = []
    celery_app.conf.task_always_eager = False
    monkeypatch.setattr(tasks.render_fleet_figures, "apply_async", lambda *a, **kw: sent.append(kw))
    return sent


def test_api_answers_pending_then_the_figure(api, with_broker):
    build_fleet(2)
    response = api.get("/api/v1/figures/fleet-hierarchy/")
    assert response.status_code == 202
    assert response.json() == {"name": "fleet-hierarchy", "status": "pending"}
    assert len(with_broker) == 1
    # polling while pending does not flood the queue
    assert api.get("/api/v1/figures/fleet-hierarchy/").status_code == 202
    assert len(with_broker) == 1

    tasks.render_fleet_figures.run()  # what the worker does
    response = api.get("/api/v1/figures/fleet-hierarchy/")
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "fleet-hierarchy"
    assert body["revision"] == fleet_revision()
    assert body["current"] is True
    assert body["rendered_at"]
    assert body["figure"]["data"][0]["type"] == "sunburst"
    assert len(with_broker) == 1


def test_api_serves_a_stale_figure_while_the_next_one_renders(api, with_broker):
    build_fleet(2)
    fleet_render()
    old = fleet_revision()
    apply_reports(make_report("gpu-late", gpus=1, nics=0))
    body = api.get("/api/v1/figures/server-node-map/").json()
    assert body["revision"] == old and body["current"] is False
    assert "gpu-late" not in json.dumps(body["figure"])
    assert len(with_broker) == 1


def test_api_renders_on_demand_in_the_embedded_mode(api):
    build_fleet(2)
    assert celery_app.conf.task_always_eager
    response = api.get("/api/v1/figures/racks/")
    assert response.status_code == 200
    assert response.json()["current"] is True
    assert list(cached()) == ["racks"]  # only what was asked for


def test_api_lists_the_fleet_figures(api):
    build_fleet(2)
    fleet_render(names=["racks"])
    body = api.get("/api/v1/figures/").json()
    assert body["revision"] == fleet_revision()
    by_name = {f["name"]: f for f in body["figures"]}
    assert sorted(by_name) == FIGURES
    assert by_name["racks"]["status"] == "rendered" and by_name["racks"]["current"] is True
    assert by_name["fleet-hierarchy"]["status"] == "pending"
    assert by_name["racks"]["url"].endswith("/api/v1/figures/racks/")


def test_api_requires_login_and_knows_its_figures(api):
    anonymous = APIClient()
    assert anonymous.get("/api/v1/figures/racks/").status_code in (401, 403)
    assert anonymous.get("/api/v1/figures/").status_code in (401, 403)
    assert api.get("/api/v1/figures/no-such-figure/").status_code == 404


def test_api_figures_are_in_the_openapi_schema(api):
    paths = api.get("/api/schema/?format=json").json()["paths"]
    assert "/api/v1/figures/{name}/" in paths and "/api/v1/figures/" in paths


# Server figures -------------------------------------------------------------------------


def test_server_figures_come_from_the_prefetched_server_without_queries(
    django_assert_num_queries,
):
    build_fleet(2)
    mig_server = server_detail().get(hostname="gpu-000")
    with django_assert_num_queries(0):
        figures = server_figures(mig_server)
    assert sorted(figures) == ["interconnect_matrix", "mig_layout", "nvlink_graph"]
    mig = figures["mig_layout"]
    assert [t["name"] for t in mig["data"]] == ["free slice", "2g.20gb", "3g.40gb"]

    plain = server_detail().get(hostname="gpu-001")
    assert sorted(server_figures(plain)) == ["interconnect_matrix", "nvlink_graph"]


def test_a_server_without_gpus_has_no_figures():
    apply_reports(make_report("login-01", gpus=0, nics=0))
    assert server_figures(server_detail().get(hostname="login-01")) == {}


def test_agent_strings_are_escaped_in_every_figure_end_to_end():
    """An agent reporting `<img src=x onerror=alert(1)>` with GPUs named `<script>`."""
    report = make_report(EVIL_HOST, gpus=2, model=EVIL_GPU, mig_gpus={0: ["1g.10gb"]})
    servers = apply_reports(report)
    Server.objects.update(rack="r1", rack_position=3)
    server = server_detail().get(pk=servers[EVIL_HOST].pk)
    figures = server_figures(server)
    assert sorted(figures) == ["interconnect_matrix", "mig_layout", "nvlink_graph"]
    for figure in figures.values():
        assert_escaped(figure, EVIL_GPU)
    fleet_render()
    for name, row in cached().items():
        assert_escaped(row.figure, EVIL_HOST)
        if name != "server-node-map":
            assert_escaped(row.figure, EVIL_GPU)
        assert not [s for s in strings(row.figure) if "<script" in s or "<img" in s]


# The template snippet and the static files ----------------------------------------------


def test_the_figure_snippet_embeds_json_that_cannot_close_the_script():
    figure = {"data": [], "layout": {"title": {"text": "</script><script>alert(1)</script>"}}}
    html = render_to_string(
        "core/_figure.html", {"name": "matrix", "figure": figure, "label": "Matrix"}
    )
    assert 'data-figure="figure-matrix-data"' in html
    assert '<script id="figure-matrix-data" type="application/json">' in html
    assert "</script><script>" not in html
    assert "\\u003C/script\\u003E" in html
    payload = re.search(r'application/json">(.*)</script>', html, re.S).group(1)
    assert json.loads(payload) == figure


def test_the_figure_snippet_asks_the_api_when_given_no_figure():
    html = render_to_string("core/_figure.html", {"name": "fleet-hierarchy"})
    assert 'data-figure-url="/api/v1/figures/fleet-hierarchy/"' in html
    assert "pending" in html and "<script" not in html
    html = render_to_string(
        "core/_figure.html", {"name": "x", "url": "/api/v1/figures/racks/", "refresh": 60}
    )
    assert 'data-figure-url="/api/v1/figures/racks/"' in html
    assert 'data-figure-refresh="60"' in html


def test_plotly_js_is_served_locally_in_the_version_its_name_says():
    static = Path(settings.BASE_DIR) / "static"
    scripts = render_to_string("core/_figure_scripts.html")
    src = re.search(r'src="/static/(vendor/plotly-[\d.]+\.min\.js)"', scripts).group(1)
    version = re.search(r"plotly-([\d.]+)\.min\.js", src).group(1)
    head = (static / src).read_text(encoding="utf-8")[:200]
    assert f"plotly.js v{version}" in head
    assert 'src="/static/js/figures.js"' in scripts
    loader = (static / "js" / "figures.js").read_text(encoding="utf-8")
    assert "Plotly.react" in loader and "http://" not in loader and "https://" not in loader


def test_fleet_rows_carry_each_servers_worst_open_finding():
    from findings.models import Finding

    build_fleet(3)
    a, b, c = Server.objects.order_by("hostname")[:3]
    Finding.objects.all().delete()
    for server, severity, resolved in (
        (a, "warning", False),
        (a, "critical", False),
        (b, "critical", True),  # resolved: no longer counts
        (b, "info", False),
    ):
        Finding.objects.create(
            type="gpu_count_mismatch" if severity != "critical" else "unhealthy_gpu",
            severity=severity,
            subject=f"server:{server.hostname}:{severity}",
            message="test",
            server=server,
            resolved_at=timezone.now() if resolved else None,
        )
    health = {s["hostname"]: s["health"] for s in fleet_rows()["servers"]}
    assert (health[a.hostname], health[b.hostname], health[c.hostname]) == (
        "critical",
        "info",
        "",
    )
