"""The dashboard in a real browser: pages render, nothing leaves 127.0.0.1, input is text."""

from __future__ import annotations

import pytest

from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from inventory.models import Server
from tests.nodes import k8s_node, k8s_node_list
from tests.reports import apply_reports, make_report

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EVIL_HOST = "<img src=x onerror=alert(1)>"
EVIL_GPU = "<script>alert(2)</script>"


def small_fleet():
    servers = apply_reports(
        make_report("dgx-01"),
        make_report(
            "a100-01",
            model="NVIDIA A100-SXM4-80GB",
            mig_gpus={0: ["3g.40gb", "2g.20gb", "1g.10gb"]},
        ),
    )
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(
            k8s_node("dgx-01", system_uuid=servers["dgx-01"].system_uuid),
            k8s_node("gpu-b02", gpus=4),
        ),
    )
    reconcile_all()
    return servers


def test_sign_in_required(browser, live_server):
    page = browser.new_page()
    page.goto(live_server.url + "/servers/")
    assert "/login/" in page.url
    page.close()


def test_overview_servers_nodes_findings_and_server_page(signed_in):
    servers = small_fleet()
    signed_in.open("/")
    line = signed_in.page.inner_text("#layers-line")
    assert (
        "2 servers" in line
        and "2 nodes" in line
        and "16 GPUs" in line
        and "3 MIG instances" in line
    )
    signed_in.screenshot("overview")

    signed_in.open("/servers/", wait_for="#servers")
    assert signed_in.page.locator("#servers tbody tr").count() == 2
    signed_in.page.click("text=GPUs >> nth=1")  # sort by the GPUs column header
    signed_in.open("/nodes/", wait_for="#nodes")
    assert "no agent" in signed_in.page.inner_text("#nodes")
    signed_in.open("/findings/", wait_for="#findings")
    assert "gpu-b02" in signed_in.page.inner_text("#findings")
    signed_in.screenshot("findings")

    signed_in.open(f"/servers/{servers['a100-01'].pk}/", wait_for="#gpu-table")
    assert "3g.40gb" in signed_in.page.inner_text("#mig-table")
    matrix = signed_in.page.text_content("#interconnect-matrix")  # in a closed <details>
    assert "NV18" in matrix and "GPU7" in matrix
    signed_in.screenshot("server")
    signed_in.assert_clean()


def test_agent_supplied_names_are_text_on_every_page(signed_in):
    report = make_report("evil", model=EVIL_GPU)
    report["host"]["hostname"] = EVIL_HOST
    servers = apply_reports(report)
    server = Server.objects.get(hostname=EVIL_HOST)
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(k8s_node(EVIL_HOST, system_uuid=server.system_uuid, gpus=4)),
    )
    reconcile_all()
    assert servers
    expected = {
        "/": [EVIL_HOST],
        "/servers/": [EVIL_HOST],
        f"/servers/{server.pk}/": [EVIL_HOST, EVIL_GPU],
        "/nodes/": [EVIL_HOST],
        "/findings/": [EVIL_HOST],
        "/gpus/": [EVIL_HOST, EVIL_GPU],
    }
    for path, names in expected.items():
        signed_in.open(path)
        text = signed_in.page.inner_text("main")
        for name in names:
            assert name in text, (path, name)
        assert signed_in.page.locator("main img[src=x]").count() == 0, path
    signed_in.screenshot("escaping")
    signed_in.assert_clean()


def test_api_docs_load_from_this_server_only(signed_in):
    signed_in.open("/api/docs/", wait_for=".swagger-ui .info")
    assert "Cluster Atlas API" in signed_in.page.inner_text(".swagger-ui .info")
    signed_in.assert_clean()


def test_figures_render_on_the_server_and_topology_pages(signed_in):
    servers = small_fleet()
    signed_in.open(
        f"/servers/{servers['a100-01'].pk}/", wait_for="#figure-interconnect_matrix .main-svg"
    )
    signed_in.figure("nvlink_graph")
    signed_in.figure("mig_layout")
    matrix = signed_in.page.inner_text("#figure-interconnect_matrix")
    assert "NV18" in matrix and "NVLink" in matrix  # cells and the legend that explains them
    assert "3g.40gb" in signed_in.page.inner_text("#figure-mig_layout")
    signed_in.screenshot("server-figures")

    signed_in.open("/topology/")
    for name in ("fleet-hierarchy", "server-node-map"):
        signed_in.figure(name)
    assert "dgx-01" in signed_in.page.inner_text("#figure-server-node-map")
    assert "no agent" in signed_in.page.inner_text("#figure-server-node-map")
    signed_in.screenshot("topology")
    signed_in.assert_clean()


def test_agent_supplied_names_are_text_in_every_figure(signed_in):
    report = make_report("evil", model=EVIL_GPU, mig_gpus={0: ["1g.10gb"]})
    report["host"]["hostname"] = EVIL_HOST
    apply_reports(report)
    server = Server.objects.get(hostname=EVIL_HOST)
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(k8s_node(EVIL_HOST, system_uuid=server.system_uuid, gpus=4)),
    )
    reconcile_all()
    signed_in.open(f"/servers/{server.pk}/", wait_for="#figure-interconnect_matrix .main-svg")
    signed_in.figure("mig_layout")
    signed_in.page.hover("#figure-interconnect_matrix .nsewdrag")  # hover text too
    signed_in.open("/topology/")
    for name in ("fleet-hierarchy", "server-node-map"):
        signed_in.figure(name)
    assert EVIL_HOST in signed_in.page.inner_text("#figure-server-node-map")
    assert signed_in.page.locator("img[src=x]").count() == 0
    assert signed_in.page.locator(".main-svg script, .figure script:not([type])").count() == 0
    signed_in.assert_clean()
