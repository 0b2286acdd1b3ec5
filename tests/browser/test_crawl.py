"""A person clicking around: every menu entry and every link it leads to is a page.

The crawl starts at `/`, clicks each menu entry as a person would (the menu's own hrefs, not
URLs the test knows), then follows the same-origin links on each page two levels deep.
Every stop must be an HTML page of the dashboard's own layout: 200, `text/html`, the top bar
and main area, no JSON body, no console error, no Content-Security-Policy violation.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urldefrag, urlparse

import pytest

from clusters.models import Node
from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from inventory.models import Server
from tests.nodes import k8s_node, k8s_node_list, scontrol_node, scontrol_text
from tests.reports import apply_reports, make_report
from tests.workloads.factories import workload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MENU = ["Overview", "Servers", "Nodes", "GPUs", "Workloads", "Topology", "Findings", "Placement"]
MENU_PATHS = {
    "Overview": "/",
    "Servers": "/servers/",
    "Nodes": "/nodes/",
    "GPUs": "/gpus/",
    "Workloads": "/workloads/",
    "Topology": "/topology/",
    "Findings": "/findings/",
    "Placement": "/placement/",
}
DEPTH = 2  # links followed from each menu page, then from the pages those reach
PER_PAGE = 26  # links taken from one page (in page order), so a long table stays cheap
# (25 and the top bar's Workloads entry: the same reach into each page's tables as before)
# Links left out on purpose, each with its reason:
SKIP_PATHS = (
    "/logout/",  # ends the session the crawl runs in (and is a POST form, not a link)
    "/admin/",  # Django's admin: its own layout, for staff; not a dashboard page
    "/api/docs/",  # Swagger UI, its own layout: the menu's API link is checked on its own
    # (any other /api/ link is followed, and fails: a page link must never lead to JSON)
    "/static/",  # files: stylesheets, plotly.js, images
)
SKIP_QUERY = {"format"}  # ?format=csv: a download, not a page


def crawl_fleet() -> None:
    """Servers (one a MIG A100, one in a rack), Kubernetes and Slurm nodes, findings, and a
    job holding GPUs of dgx-01 (its page draws dgx-01's interconnect)."""
    servers = apply_reports(
        make_report("dgx-01"),
        make_report("dgx-02", gpus=4),
        make_report(
            "a100-01",
            model="NVIDIA A100-SXM4-80GB",
            mig_gpus={0: ["3g.40gb", "2g.20gb", "1g.10gb"]},
        ),
    )
    Server.objects.filter(hostname="dgx-01").update(rack="rack-01", rack_position=10)
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(
            k8s_node("dgx-01", system_uuid=servers["dgx-01"].system_uuid),
            k8s_node("gpu-b02", gpus=4),
        ),
    )
    snapshot_ingest(
        cluster_name="hpc",
        raw=scontrol_text(scontrol_node("dgx-02", gres="gpu:h100:8")),
    )
    reconcile_all()
    node = Node.objects.get(cluster__name="prod", name="dgx-01")
    workload(node.cluster, "5679", {node: [0, 1, 2, 3]}, user="alice")


def kind_of(url: str) -> tuple[str, frozenset[str]]:
    """What a link shows: its view (ids folded) and which parameters it sets.

    `/servers/3/` and `/servers/4/`, or two sort orders of one table, run the same view with
    the same parameters; one visit of each kind keeps the crawl bounded as tables grow.
    """
    parsed = urlparse(url)
    path = re.sub(r"/\d+/", "/<id>/", parsed.path)
    return path, frozenset(key for key, _value in parse_qsl(parsed.query))


def wanted(url: str, origin: str) -> bool:
    parsed = urlparse(url)
    if f"{parsed.scheme}://{parsed.netloc}" != origin:
        return False  # another origin (none is expected: the page tests fail on any request)
    if parsed.path.startswith(SKIP_PATHS):
        return False
    return not SKIP_QUERY & {key for key, _value in parse_qsl(parsed.query)}


def assert_dashboard_page(watched, response, url: str) -> None:
    from playwright.sync_api import expect  # the browser fixture skips when it is missing

    page = watched.page
    assert response is not None, url
    assert response.status == 200, (url, response.status)
    content_type = response.headers.get("content-type", "")
    assert content_type.startswith("text/html"), (url, content_type)
    assert "content-security-policy" in response.headers, url
    assert page.locator("header.topbar nav.layers").count() == 1, url
    assert page.locator("main").count() == 1, url
    body = page.inner_text("body").lstrip()
    assert not body.startswith(("{", "[")), (url, body[:80])
    # Fleet figures arrive from the API after the page: wait until each is drawn, so a
    # script error or a style the policy refuses happens inside this visit.
    # (Playwright's own locators: wait_for_function would eval, which the policy refuses.)
    # Figures are drawn as they come into view (static/js/figures.js): scroll to each.
    watched.draw_all_figures()
    expect(page.locator(".figure.pending")).to_have_count(0, timeout=20000)
    watched.assert_clean()


def links_on(watched) -> list[str]:
    hrefs = watched.page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
    return [urldefrag(h).url for h in hrefs]


def test_crawl_from_the_overview_meets_only_pages(signed_in):
    crawl_fleet()
    page = signed_in.page
    origin = signed_in.base
    signed_in.open("/")
    seen: set[tuple[str, frozenset[str]]] = set()
    visits = 0
    frontier: list[str] = []

    for entry in MENU:
        signed_in.open("/")
        with page.expect_navigation() as navigation:
            page.click(f"nav.layers a:text-is('{entry}')")
        url = page.url
        assert urlparse(url).path == MENU_PATHS[entry], (entry, url)
        assert_dashboard_page(signed_in, navigation.value, url)
        current = page.locator("nav.layers a[aria-current=page]").all_inner_texts()
        assert current == [entry], (entry, current)
        seen.add(kind_of(url))
        visits += 1
        frontier.extend(links_on(signed_in)[:PER_PAGE])

    for _level in range(DEPTH):
        following: list[str] = []
        for url in frontier:
            if not wanted(url, origin) or kind_of(url) in seen:
                continue
            seen.add(kind_of(url))
            response = page.goto(url)
            assert_dashboard_page(signed_in, response, url)
            visits += 1
            following.extend(links_on(signed_in)[:PER_PAGE])
        frontier = following

    # The crawl reached the tables' links, not only the menu: a server page, filtered lists.
    assert ("/servers/<id>/", frozenset()) in seen
    assert ("/workloads/<id>/", frozenset()) in seen
    assert any(path == "/nodes/" and query for path, query in seen)
    assert any(path == "/findings/" and query for path, query in seen)
    assert visits >= 15, sorted(seen)


def test_menu_api_link_opens_the_docs_page(signed_in):
    signed_in.open("/")
    with signed_in.page.expect_navigation() as navigation:
        signed_in.page.click("header .account a:text-is('API')")
    response = navigation.value
    assert urlparse(signed_in.page.url).path == "/api/docs/"
    assert response.status == 200
    assert response.headers["content-type"].startswith("text/html")
    signed_in.page.wait_for_selector(".swagger-ui .info", timeout=15000)
    signed_in.assert_clean()


def test_the_policy_is_sent_enforced_and_met_by_the_figures(signed_in):
    crawl_fleet()
    server = Server.objects.get(hostname="a100-01")
    response = signed_in.open(
        f"/servers/{server.pk}/", wait_for="#figure-interconnect_matrix .main-svg"
    )
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy
    for name in ("nvlink_graph", "mig_layout"):
        signed_in.figure(name)
    signed_in.page.hover("#figure-interconnect_matrix .nsewdrag")  # hover text: <b> labels
    signed_in.page.wait_for_selector("#figure-interconnect_matrix .hovertext")
    assert signed_in.page.locator("#figure-interconnect_matrix tspan[style]").count() > 0
    signed_in.assert_clean()  # plotly's own inline styles are all allowed, by hash

    # Enforced, not only sent: a script injected into the page does not run.
    with pytest.raises(Exception, match=r"Content Security Policy|CSP"):
        signed_in.page.add_script_tag(content="document.body.dataset.injected = 'ran'")
    assert signed_in.page.get_attribute("body", "data-injected") is None
