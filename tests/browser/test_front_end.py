"""The figure loader and the theme in a real browser, reached by clicking from the overview.

A figure below the fold is not drawn until it is scrolled into view, then is, in the space its
placeholder kept; text and tables are painted before any figure. In dark mode (the browser's
`prefers-color-scheme`) the page and the figures' paper are dark, every mark stands out from
that paper, and a change of scheme redraws the figures. The mode bar downloads SVG as well as
PNG; printing is light. Nothing breaks the Content-Security-Policy or logs an error.
Screenshots go to test-artifacts/front-end-*.png; timings (the demo fleet) to
test-artifacts/front-end-timings.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.reports import apply_reports, make_report

from .conftest import ARTIFACTS, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LUMINANCE = """colour => {
  const rgb = /rgba?\\((\\d+), *(\\d+), *(\\d+)/.exec(colour);
  const hex = /^#(..)(..)(..)$/.exec(colour);
  const m = rgb ? rgb.map(Number) : hex.map(v => parseInt(v, 16));
  const c = [1, 2, 3].map(i => { const v = m[i] / 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
  return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
}"""
MARK_COLOURS = """el => {
  const out = new Set();
  const walk = (value, key) => {
    if (Array.isArray(value)) { value.forEach(v => walk(v, key)); return; }
    if (value && typeof value === 'object') {
      for (const k of Object.keys(value)) { if (k !== 'textfont') walk(value[k], k); }
      return;
    }
    if (typeof value === 'string' && /^#[0-9a-f]{6}$/i.test(value) &&
        /^(color|colors)$/.test(key || '')) { out.add(value.toLowerCase()); }
  };
  walk(el.data.map(t => ({marker: t.marker, line: t.line})));
  return [Array.from(out), el._fullLayout.paper_bgcolor];
}"""


def mig_server():
    """An A100 with MIG: its page has the interconnect figures, a GPU table, then MIG."""
    servers = apply_reports(
        make_report("dgx-01"),
        make_report("a100-01", model="NVIDIA A100-SXM4-80GB", mig_gpus={0: ["3g.40gb", "1g.10gb"]}),
    )
    return servers["a100-01"]


@pytest.fixture
def open_as(browser, live_server, django_user_model):
    """`open_as(width, **context_options)`: a viewer signed in, in a context of its own."""
    django_user_model.objects.create_user("viewer", password="viewer-password-1")
    contexts = []

    def open_as(width: int = 1440, **options):
        context, watched = sign_in(
            browser, live_server.url, "viewer", "viewer-password-1", width, **options
        )
        contexts.append(context)
        return watched

    yield open_as
    for context in contexts:
        context.close()


def click_to_server(watched, hostname: str) -> None:
    """Overview -> Servers -> the server's page, by clicking."""
    page = watched.page
    page.click("#menu-layers >> text=Servers")
    page.wait_for_selector("#servers")
    page.click(f"#servers a:text-is('{hostname}')")
    page.wait_for_selector("h1")


def luminance(watched, colour: str) -> float:
    return watched.page.evaluate(LUMINANCE, colour)


def test_a_figure_below_the_fold_is_drawn_when_scrolled_into_view(open_as):
    mig_server()
    watched = open_as(1440)
    page = watched.page
    click_to_server(watched, "a100-01")
    mig = page.locator("#figure-mig_layout")
    page.wait_for_load_state("load")
    page.wait_for_timeout(1500)  # time enough to draw, had it been asked to
    box = mig.bounding_box()
    assert box and box["y"] > page.viewport_size["height"] + 300, box  # well below the fold
    assert page.locator("#gpus, table.data").first.is_visible()  # the tables are there
    assert "pending" in (mig.get_attribute("class") or "")
    assert mig.locator(".main-svg").count() == 0 and mig.get_attribute("data-drawn") is None
    assert "MIG layout" in mig.inner_text()  # the placeholder says what will be there
    reserved = box["height"]

    mig.scroll_into_view_if_needed()
    page.wait_for_selector("#figure-mig_layout[data-drawn='1'] .main-svg", timeout=20000)
    assert "3g.40gb" in mig.inner_text()
    drawn = mig.bounding_box()
    assert drawn and abs(drawn["height"] - reserved) <= 2, (reserved, drawn)  # no shift
    assert "pending" not in (mig.get_attribute("class") or "")
    # Text and tables were painted before the first figure was drawn.
    order = page.evaluate(
        """() => [performance.getEntriesByType('paint')
                   .find(e => e.name === 'first-contentful-paint').startTime,
                  Math.min(...performance.getEntriesByType('mark')
                   .filter(m => m.name.startsWith('atlas:figure-drawn:')).map(m => m.startTime))]"""
    )
    assert order[0] < order[1], order
    watched.screenshot("front-end-mig-drawn")
    watched.assert_clean()


def test_dark_mode_darkens_the_page_and_the_figures_and_follows_a_change(open_as):
    mig_server()
    watched = open_as(1440, color_scheme="dark")
    page = watched.page
    click_to_server(watched, "a100-01")
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    if background in ("rgba(0, 0, 0, 0)", "transparent"):
        background = page.evaluate(
            "() => getComputedStyle(document.documentElement).backgroundColor"
        )
    assert luminance(watched, background) < 0.05, background
    ink = page.evaluate("() => getComputedStyle(document.querySelector('h1')).color")
    assert luminance(watched, ink) > 0.6, ink
    for name in ("interconnect_matrix", "nvlink_graph", "mig_layout"):
        watched.figure(name)
        figure = page.locator(f"#figure-{name}")
        assert figure.get_attribute("data-theme") == "dark"
        paper = figure.evaluate("el => el._fullLayout.paper_bgcolor")
        assert luminance(watched, paper) < 0.05, (name, paper)
        svg_background = figure.evaluate(
            "el => getComputedStyle(el.querySelector('.main-svg')).backgroundColor"
        )
        assert luminance(watched, svg_background) < 0.05, (name, svg_background)
        font = figure.evaluate("el => el._fullLayout.font.color")
        assert luminance(watched, font) > 0.6, (name, font)
        marks, paper = figure.evaluate(MARK_COLOURS)
        # Every marker and line stands 3:1 from the dark paper (outlines drawn in the
        # paper's own colour, to separate marks, are that on purpose).
        for mark in (m for m in marks if m != paper.lower()):
            ratio = (luminance(watched, mark) + 0.05) / (luminance(watched, paper) + 0.05)
            assert ratio >= 3 - 0.05, (name, mark, paper, ratio)
    page.locator("#figure-nvlink_graph").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "front-end-dark-1440.png"))

    page.emulate_media(color_scheme="light")  # the person switches their system back
    page.wait_for_selector("#figure-nvlink_graph[data-theme='light']", timeout=10000)
    paper = page.locator("#figure-nvlink_graph").evaluate("el => el._fullLayout.paper_bgcolor")
    assert paper.lower() in ("#ffffff", "#fff", "rgb(255, 255, 255)"), paper
    background = page.evaluate("() => getComputedStyle(document.documentElement).backgroundColor")
    assert luminance(watched, background) > 0.8, background
    watched.assert_clean()


def test_a_figure_downloads_as_svg_and_as_png(open_as):
    mig_server()
    watched = open_as(1440, accept_downloads=True)
    page = watched.page
    click_to_server(watched, "a100-01")
    watched.figure("nvlink_graph")
    figure = page.locator("#figure-nvlink_graph")
    figure.hover()
    svg_button = figure.locator(".modebar-btn[data-title='Download as SVG']")
    with page.expect_download(timeout=20000) as download_info:
        svg_button.click()
    download = download_info.value
    assert download.suggested_filename == "nvlink_graph.svg"
    text = Path(download.path()).read_text(encoding="utf-8")
    assert text.lstrip().startswith("<svg") and "GPU" in text and "<script" not in text

    figure.hover()
    with page.expect_download(timeout=20000) as download_info:
        figure.locator(".modebar-btn[data-title^='Download plot as a PNG']").click()
    download = download_info.value
    assert download.suggested_filename == "nvlink_graph.png"
    assert Path(download.path()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    watched.assert_clean()


def test_printing_is_light_and_draws_every_figure(open_as):
    mig_server()
    watched = open_as(1440, color_scheme="dark")
    page = watched.page
    click_to_server(watched, "a100-01")
    page.wait_for_load_state("load")
    assert page.locator("#figure-mig_layout[data-drawn='1']").count() == 0
    page.emulate_media(media="print")
    background = page.evaluate("() => getComputedStyle(document.documentElement).backgroundColor")
    assert luminance(watched, background) > 0.8, background
    assert page.locator("#topbar").is_hidden()
    # Printing (here: to PDF) asks the loader to draw what is still waiting, light.
    for _ in range(100):  # the page loads plotly.js once it rests (no eval: the policy)
        if page.evaluate("() => typeof Plotly !== 'undefined'"):
            break
        page.wait_for_timeout(200)
    # What the figures are while the page prints (this listener runs after the loader's).
    page.evaluate(
        """() => window.addEventListener('beforeprint', () => {
             window.__printed = Array.from(document.querySelectorAll('.figure')).map(el =>
               [el.id, el._fullLayout ? el._fullLayout.paper_bgcolor : null]);
           })"""
    )
    page.pdf(path=str(ARTIFACTS / "front-end-print.pdf"))
    printed = dict(page.evaluate("() => window.__printed"))
    for name in ("interconnect_matrix", "nvlink_graph", "mig_layout"):
        paper = printed[f"figure-{name}"]
        assert paper and luminance(watched, paper) > 0.8, (name, paper)
        assert page.locator(f"#figure-{name}").get_attribute("data-drawn") == "1", name
    # After printing, the screen is dark again.
    page.wait_for_selector("#figure-mig_layout[data-theme='dark']", timeout=10000)
    watched.assert_clean()


def test_demo_pages_show_tables_first_and_draw_only_what_is_in_view(open_as):
    """The demo fleet's server, topology, health and fabric pages, clicked to from the
    overview: time to DOMContentLoaded, load, first paint and first figure, and how many
    figures were drawn before any scrolling (test-artifacts/front-end-timings.json)."""
    call_command("demo")
    watched = open_as(1440)
    page = watched.page
    read = """() => { const n = performance.getEntriesByType('navigation')[0];
      const p = performance.getEntriesByType('paint')
        .find(e => e.name === 'first-contentful-paint');
      const marks = performance.getEntriesByType('mark')
        .filter(m => m.name.startsWith('atlas:figure-drawn:')).map(m => m.startTime);
      return {dom_content_loaded_ms: Math.round(n.domContentLoadedEventEnd),
              load_ms: Math.round(n.loadEventEnd),
              first_paint_ms: p ? Math.round(p.startTime) : null,
              first_figure_ms: marks.length ? Math.round(Math.min(...marks)) : null,
              figures: document.querySelectorAll('[data-figure], [data-figure-url]').length,
              drawn_unscrolled: marks.length}; }"""
    timings = {}

    def settle(name: str) -> None:
        page.wait_for_load_state("load")
        page.wait_for_timeout(2000)
        timings[name] = page.evaluate(read)

    page.click("#menu-layers >> text=Servers")
    page.wait_for_selector("#servers")
    page.locator("#servers tbody tr a[href^='/servers/']").first.click()
    settle("server")
    for entry in ("Topology", "Health", "Fabric"):
        page.click(f"#menu-layers >> text={entry}")
        settle(entry.lower())
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "front-end-timings.json").write_text(json.dumps(timings, indent=1))
    for name, row in timings.items():
        if row["first_figure_ms"] is not None:
            assert (
                row["first_paint_ms"] is not None and row["first_paint_ms"] < row["first_figure_ms"]
            ), (name, row)
        assert row["drawn_unscrolled"] <= row["figures"], (name, row)
    watched.assert_clean()
