"""Pages that fit the screen at 1440, 1024 and 390 px; the palette, focus and honest states.

Every page at every width: no card's content overflows the card (long FQDNs, machine IDs and
node names wrap; tables scroll inside their own wrapper), the page itself never scrolls
sideways, and the browser reports nothing (no CSP violation, script error or outside
request). Screenshots go to test-artifacts/<page>-<width>.png.
"""

from __future__ import annotations

import pytest

from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from inventory.models import Gpu, Server
from tests.nodes import k8s_node, k8s_node_list
from tests.reports import apply_reports, make_report

from .conftest import OVERFLOWS, WIDTHS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_FQDN = "dgx-h100-07.an-unusually-long-subdomain-for-the-east-zone-b-hall-3.cluster.example.org"
LONG_NODE = "dgx-h100-07-gpu-partition-a-very-long-kubernetes-node-name-from-a-managed-cloud"


def fleet() -> dict[str, Server]:
    servers = apply_reports(
        make_report("dgx-h100-07", fqdn=LONG_FQDN),
        make_report(
            "l40s-01",
            gpus=4,
            model="NVIDIA L40S",
            link_class="SYS",
            product="AS -4125GS-TNRT",
            vendor="Supermicro",
        ),
        make_report("a100-01", model="NVIDIA A100-SXM4-80GB", mig_gpus={0: ["3g.40gb", "1g.10gb"]}),
    )
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(
            k8s_node(LONG_NODE, system_uuid=servers["dgx-h100-07"].system_uuid),
            k8s_node("gpu-b02", gpus=4),
        ),
    )
    reconcile_all()
    for position, name in enumerate(("dgx-h100-07", "l40s-01", "a100-01")):
        Server.objects.filter(pk=servers[name].pk).update(
            rack="r01", rack_position=2 + 10 * position
        )
    return servers


@pytest.fixture
def sized(signed_in_at):
    """A signed-in page (a viewer) at a given width."""
    return signed_in_at


@pytest.mark.parametrize("width", WIDTHS)
def test_no_card_overflows_on_any_page(sized, width):
    servers = fleet()
    gpu = Gpu.objects.filter(server=servers["dgx-h100-07"]).order_by("index").first()
    watched = sized(width)
    pages = {
        "overview": ("/", None),
        "servers": ("/servers/", "#servers"),
        "server": (f"/servers/{servers['dgx-h100-07'].pk}/", "#figure-nvlink_graph .main-svg"),
        "server-l40s": (f"/servers/{servers['l40s-01'].pk}/", "#figure-nvlink_graph .main-svg"),
        "server-mig": (f"/servers/{servers['a100-01'].pk}/", "#figure-mig_layout .main-svg"),
        "nodes": ("/nodes/", "#nodes"),
        "gpus": ("/gpus/", "#gpus"),
        "findings": ("/findings/", "#findings"),
        "placement": ("/placement/?tab=placement&gpus=8", "#placement-answer"),
        "topology": ("/topology/", None),
        "health": ("/health/", "#gpus-needing-action"),
        "gpu": (f"/gpus/{gpu.pk}/", "#gpu-placements"),
    }
    problems = {}
    for name, (path, wait_for) in pages.items():
        watched.open(path, wait_for=wait_for)
        if name == "topology":
            for figure in ("fleet-hierarchy", "server-node-map", "racks"):
                watched.figure(figure)
        watched.draw_all_figures()  # drawn as a reader scrolls to them: measure them drawn
        found = watched.page.evaluate(OVERFLOWS)
        if found:
            problems[name] = found
        watched.screenshot(f"{name}-{width}")
    assert problems == {}
    # The long values are on the page, wrapped, not cut.
    watched.open(f"/servers/{servers['dgx-h100-07'].pk}/")
    assert LONG_FQDN in watched.page.inner_text("main")
    assert LONG_NODE in watched.page.inner_text("#server-nodes")
    watched.assert_clean()


@pytest.mark.parametrize("width", WIDTHS)
def test_figures_keep_a_legible_size(sized, width):
    servers = fleet()
    watched = sized(width)
    watched.open(
        f"/servers/{servers['dgx-h100-07'].pk}/", wait_for="#figure-interconnect_matrix .main-svg"
    )
    box = watched.page.locator("#figure-interconnect_matrix").bounding_box()
    assert box and box["width"] >= 160 + 40 * 10  # 8 GPUs + 2 NICs, 40 px cells at least
    watched.open(f"/servers/{servers['l40s-01'].pk}/", wait_for="#figure-nvlink_graph .main-svg")
    text = watched.page.inner_text("#figure-nvlink_graph")
    assert "No NVLink between these 4 GPUs" in text and "PCIe switch" in text
    watched.screenshot(f"server-l40s-graph-{width}")
    watched.open("/topology/")
    watched.figure("fleet-hierarchy")
    label_px = watched.page.evaluate(
        r"""() => Array.from(document.querySelectorAll('#figure-fleet-hierarchy .slicetext text'))
             .filter(t => t.textContent.trim())
             .map(t => { const m = /scale\(([\d.e-]+)\)/.exec(t.getAttribute('transform') || '');
                         return [t.textContent, parseFloat(getComputedStyle(t).fontSize) *
                                 (m ? parseFloat(m[1]) : 1)]; })"""
    )
    assert label_px and all(px >= 8 for _, px in label_px), label_px
    watched.assert_clean()


def test_menu_folds_at_phone_width_and_opens_with_its_button(sized):
    fleet()
    watched = sized(390)
    page = watched.page
    toggle = page.locator(".nav-toggle")
    assert toggle.is_visible()
    assert toggle.get_attribute("aria-expanded") == "false"
    assert not page.locator("#menu-layers a[href='/servers/']").is_visible()
    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "true"
    servers_link = page.locator("#menu-layers a[href='/servers/']")
    assert servers_link.is_visible()
    box = page.locator("#menu-layers").bounding_box()
    assert box and box["width"] > 200  # not the zero-width menu of before
    watched.screenshot("menu-open-390")
    servers_link.click()
    page.wait_for_url("**/servers/")
    assert page.locator("h1").inner_text().startswith("Servers")
    page.locator(".nav-toggle").click()
    page.locator("#menu-layers a[href='/nodes/']").click()
    page.wait_for_url("**/nodes/")
    watched.assert_clean()


@pytest.mark.parametrize("width", (1440, 1024))
def test_menu_is_always_shown_on_wide_screens(sized, width):
    watched = sized(width)
    assert not watched.page.locator(".nav-toggle").is_visible()
    assert watched.page.locator("#menu-layers a[href='/servers/']").is_visible()


@pytest.mark.parametrize("width", WIDTHS)
def test_skip_link_is_first_and_focus_is_visible_on_the_top_bar(sized, width):
    watched = sized(width)
    page = watched.page
    page.keyboard.press("Tab")
    first = page.evaluate("() => document.activeElement.textContent.trim()")
    assert first == "Skip to content"
    assert page.locator(".skip-link").is_visible()  # shown while focused
    page.keyboard.press("Tab")  # the brand link, on the dark top bar
    ring = page.evaluate(
        """() => { const s = getComputedStyle(document.activeElement);
                   return [s.outlineStyle, parseFloat(s.outlineWidth), s.outlineColor,
                           !!document.activeElement.closest('.topbar')]; }"""
    )
    assert ring[0] != "none" and ring[1] >= 2 and ring[3], ring
    assert ring[2] in ("rgb(255, 209, 102)",), ring  # --focus: bright on #14283a
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Enter")  # follow the skip link
    assert page.evaluate("() => document.activeElement.id") == "content"
    watched.screenshot(f"focus-{width}")
    watched.assert_clean()


@pytest.mark.parametrize("width", WIDTHS)
def test_unknown_id_shows_the_apps_404_page_with_its_menu(sized, width):
    watched = sized(width)
    response = watched.page.goto(watched.base + "/servers/987654/")
    assert response is not None and response.status == 404
    assert watched.page.locator("#not-found h1").inner_text() == "Not found"
    assert watched.page.locator("#menu-layers a[href='/servers/']").count() == 1
    if width == 390:
        watched.page.locator(".nav-toggle").click()
    assert watched.page.locator("#menu-layers a[href='/servers/']").is_visible()
    watched.screenshot(f"not-found-{width}")
    # The page's own 404 status is the one console message; nothing else went wrong.
    assert all("404 (Not Found)" in m for m in watched.console_errors), watched.console_errors
    watched.console_errors.clear()
    watched.assert_clean()


@pytest.mark.parametrize("width", WIDTHS)
def test_search_without_results_says_so_and_clears(sized, width):
    fleet()
    watched = sized(width)
    watched.open("/servers/?search=no-such-server", wait_for="#empty-state")
    text = watched.page.inner_text("#empty-state")
    assert "No servers match search “no-such-server”." in text
    assert "Agents appear here" not in text
    watched.screenshot(f"servers-empty-search-{width}")
    watched.page.click("#clear-filters")
    watched.page.wait_for_selector("#servers tbody tr >> nth=2")
    assert watched.page.locator("#servers tbody tr").count() == 3
    assert watched.page.input_value("input[name=search]") == ""
    watched.open("/nodes/?search=zz-nothing", wait_for="#empty-state")
    assert "No nodes match search “zz-nothing”." in watched.page.inner_text("#empty-state")
    watched.assert_clean()


def test_badges_use_the_palette_everywhere(sized):
    fleet()
    watched = sized(1440)
    watched.open("/nodes/", wait_for="#nodes")
    colours = watched.page.evaluate(
        """() => Array.from(document.querySelectorAll('.badge')).map(b => {
             const s = getComputedStyle(b); return [b.className, s.color, s.backgroundColor]; })"""
    )
    assert colours
    tones = {"ok", "info", "warning", "critical", "neutral"}
    for class_name, _, _ in colours:
        assert set(class_name.split()) - {"badge"} <= tones, class_name
    watched.assert_clean()
