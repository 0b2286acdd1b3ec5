"""One state palette: the CSS custom properties are core.palette's, readable, mapped once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.template import Context, Template

from core.palette import PALETTE, TONES, contrast_ratio, state_tone

CSS = Path(__file__).resolve().parents[2] / "static" / "css" / "atlas.css"


def css_variables() -> dict[str, str]:
    root = re.search(r":root\s*{(.*?)}", CSS.read_text(), re.S)
    assert root, "atlas.css has no :root block"
    return {
        name: value.lower()
        for name, value in re.findall(r"--([\w-]+):\s*(#[0-9a-fA-F]{6})\b", root.group(1))
    }


def test_css_state_variables_are_the_python_palette():
    variables = css_variables()
    for tone in TONES:
        assert variables[tone] == PALETTE[tone]["ink"], tone
        assert variables[f"{tone}-soft"] == PALETTE[tone]["soft"], tone
        assert variables[f"{tone}-solid"] == PALETTE[tone]["solid"], tone


@pytest.mark.parametrize("tone", TONES)
def test_badge_text_meets_wcag_aa_on_its_background(tone):
    variables = css_variables()
    assert contrast_ratio(variables[tone], variables[f"{tone}-soft"]) >= 4.5
    assert contrast_ratio(variables[tone], "#ffffff") >= 4.5  # state words outside badges


@pytest.mark.parametrize("tone", TONES)
def test_white_text_on_solid_marks_meets_wcag_aa(tone):
    assert contrast_ratio("#ffffff", css_variables()[f"{tone}-solid"]) >= 4.5


def test_contrast_ratio_matches_the_wcag_reference_values():
    assert contrast_ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast_ratio("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)


def test_every_badge_rule_in_the_stylesheet_is_a_tone():
    classes = set(re.findall(r"\.badge\.([\w-]+)", CSS.read_text()))
    assert classes == set(TONES)


@pytest.mark.parametrize(
    ("state", "flags", "tone"),
    [
        ("idle", ["drain"], "warning"),  # a drained node is not green
        ("idle", [], "ok"),
        ("mixed", [], "info"),  # a normal busy node is not amber
        ("allocated", [], "info"),
        ("allocated", ["drain"], "warning"),
        ("down", ["not_responding"], "critical"),
        ("idle", ["not_responding"], "warning"),
        ("ready", ["cordoned"], "warning"),
        ("NotReady", [], "critical"),
        ("online", [], "ok"),
        ("stale", [], "warning"),
        ("offline", [], "critical"),
        ("never", [], "neutral"),
        ("lost", [], "critical"),
        ("critical", [], "critical"),
        ("warning", [], "warning"),
        ("info", [], "info"),
        ("something-new", [], "neutral"),  # unknown words are never green
    ],
)
def test_state_tone_maps_states_once(state, flags, tone):
    assert state_tone(state, flags) == tone


def test_badge_tag_uses_the_mapping_and_escapes():
    html = Template("{% load atlas %}{% badge state raw flags=flags %}{% badge evil %}").render(
        Context({"state": "idle", "raw": "IDLE+DRAIN", "flags": ["drain"], "evil": "<b>x</b>"})
    )
    assert '<span class="badge warning" data-state="idle">IDLE+DRAIN</span>' in html
    assert "<b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
