"""Dark mode: atlas.css's dark block is core.palette.DARK_PALETTE and core.figures.DARK, every
colour is legible on the dark panel, and the figure loader's theme says the same."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.template.loader import render_to_string

from core.figures import DARK, INK, LINE, MARK_CONTRAST, MUTED, PAPER, base_layout, figure_themes
from core.palette import DARK_PALETTE, PALETTE, TONES, contrast_ratio

STATIC = Path(__file__).resolve().parents[2] / "static"
CSS = (STATIC / "css" / "atlas.css").read_text()


def block(pattern: str) -> dict[str, str]:
    found = re.search(pattern + r"\s*{\s*:root\s*{(.*?)}", CSS, re.S)
    assert found, pattern
    return {
        name: value.lower()
        for name, value in re.findall(r"--([\w-]+):\s*(#[0-9a-fA-F]{6})\b", found.group(1))
    }


def light() -> dict[str, str]:
    root = re.search(r"^:root\s*{(.*?)}", CSS, re.S | re.M)
    assert root
    return {n: v.lower() for n, v in re.findall(r"--([\w-]+):\s*(#[0-9a-fA-F]{6})\b", root[1])}


DARK_CSS = block(r"@media screen and \(prefers-color-scheme: dark\)")


def test_the_dark_block_is_on_screen_only_so_paper_prints_light():
    assert "@media (prefers-color-scheme: dark)" not in CSS
    assert "@media screen and (prefers-color-scheme: dark)" in CSS


def test_dark_css_tones_are_the_dark_palette():
    for tone in TONES:
        assert DARK_CSS[tone] == DARK_PALETTE[tone]["ink"], tone
        assert DARK_CSS[f"{tone}-soft"] == DARK_PALETTE[tone]["soft"], tone
        assert DARK_CSS[f"{tone}-solid"] == DARK_PALETTE[tone]["solid"], tone


def test_the_figures_light_and_dark_surfaces_are_the_pages():
    assert (light()["ink"], light()["muted"], light()["line"]) == (INK, MUTED, LINE)
    assert base_layout()["paper_bgcolor"] == PAPER == "#ffffff"
    assert DARK_CSS["panel"] == DARK["paper"]
    assert (DARK_CSS["ink"], DARK_CSS["muted"], DARK_CSS["line"]) == (
        DARK["ink"],
        DARK["muted"],
        DARK["line"],
    )


@pytest.mark.parametrize("tone", TONES)
def test_dark_tones_are_legible(tone):
    colours = DARK_PALETTE[tone]
    assert contrast_ratio(colours["ink"], colours["soft"]) >= 4.5  # a badge
    assert contrast_ratio(colours["ink"], DARK["paper"]) >= 4.5  # a state word
    assert contrast_ratio(colours["solid"], DARK["paper"]) >= MARK_CONTRAST  # a mark
    assert contrast_ratio("#ffffff", colours["solid"]) >= 4.5  # white text on the mark


def test_dark_text_and_links_are_legible_on_the_panel_and_the_background():
    for background in (DARK_CSS["panel"], DARK_CSS["bg"], DARK_CSS["head"]):
        assert contrast_ratio(DARK_CSS["ink"], background) >= 7
        assert contrast_ratio(DARK_CSS["muted"], background) >= 4.5
        assert contrast_ratio(DARK_CSS["accent"], background) >= 4.5
    assert contrast_ratio(DARK_CSS["on-accent"], DARK_CSS["accent"]) >= 4.5  # a button


def test_the_loader_theme_swaps_text_lines_and_state_marks():
    dark = figure_themes()["dark"]
    assert dark["paper"] == DARK["paper"]
    assert dark["text"] == {INK: DARK["ink"], MUTED: DARK["muted"]}
    assert dark["lines"] == {LINE: DARK["line"]}
    for tone in TONES:
        light_solid, dark_solid = PALETTE[tone]["solid"], DARK_PALETTE[tone]["solid"]
        assert dark["marks"].get(light_solid, light_solid) == dark_solid, tone
    assert dark["mark_contrast"] == MARK_CONTRAST


def test_the_figure_scripts_embed_the_themes_as_json_and_name_plotly():
    html = render_to_string("core/_figure_scripts.html")
    payload = re.search(
        r'<script id="atlas-figure-themes" type="application/json">(.*?)</script>', html, re.S
    )
    assert payload and json.loads(payload[1]) == figure_themes()
    assert re.search(r'data-plotly-src="/static/vendor/plotly-[\d.]+\.min\.js"', html)
    assert html.count("<script") == 2  # the JSON and the loader, nothing inline


def test_the_loader_draws_lazily_with_the_theme_and_offers_svg():
    loader = (STATIC / "js" / "figures.js").read_text()
    for needed in (
        "IntersectionObserver",
        "requestAnimationFrame",
        "prefers-color-scheme: dark",
        'format: "svg"',
        "beforeprint",
        "Plotly.react",
    ):
        assert needed in loader, needed
