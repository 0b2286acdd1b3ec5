"""One state palette for every page and figure: ok, info, warning, critical (and neutral).

Why one home: a drained node drawn green on one page and amber on another teaches people to
ignore colour. Every badge (the `badge` template tag), every state in a figure and the CSS
custom properties (`--ok`, `--ok-soft`, ... in static/css/atlas.css, checked equal by
tests/pages/test_palette.py) take their colour from here, and every state word maps to a
tone through `state_tone` only.

Each tone has `ink` (text, at least WCAG AA 4.5:1 on `soft` and on white), `soft` (a badge's
background) and `solid` (a mark in a figure; white text on it reads at 4.5:1 too).
"""

from __future__ import annotations

from collections.abc import Iterable

OK, INFO, WARNING, CRITICAL, NEUTRAL = "ok", "info", "warning", "critical", "neutral"
TONES = (OK, INFO, WARNING, CRITICAL, NEUTRAL)
"""Least to most severe, neutral (nothing known) last."""

PALETTE: dict[str, dict[str, str]] = {
    OK: {"ink": "#1b5e20", "soft": "#e5f3e6", "solid": "#2e7d32"},
    INFO: {"ink": "#2c4f86", "soft": "#e6edf7", "solid": "#3a5a8c"},
    WARNING: {"ink": "#7a4600", "soft": "#fdf1dc", "solid": "#a86400"},
    CRITICAL: {"ink": "#a3221a", "soft": "#fbe4e2", "solid": "#b3261e"},
    NEUTRAL: {"ink": "#4b5563", "soft": "#eceff3", "solid": "#6b7280"},
}

DARK_PALETTE: dict[str, dict[str, str]] = {
    OK: {"ink": "#7ee2a0", "soft": "#12321d", "solid": "#2e7d32"},
    INFO: {"ink": "#9ec1ff", "soft": "#172a4a", "solid": "#3d6fb0"},
    WARNING: {"ink": "#f2c14e", "soft": "#3a2a07", "solid": "#a86400"},
    CRITICAL: {"ink": "#ff9a90", "soft": "#411714", "solid": "#d32f2f"},
    NEUTRAL: {"ink": "#b3bdc8", "soft": "#262d36", "solid": "#6b7280"},
}
"""The same tones when the browser asks for dark (`prefers-color-scheme: dark`): `ink` at 4.5:1
on `soft` and on the dark panel (core.figures.DARK), `solid` at 3:1 against that panel with
white text on it at 4.5:1 still. The CSS custom properties of atlas.css's dark block are these
(tests/core/test_theme.py), and the figure loader swaps each light `solid` for its dark one."""

# State words from every layer, by tone. Node flags (Slurm's DRAIN, FAIL, ...) outrank the
# base state: an idle node that is drained is not "ok".
_TONE_OF: dict[str, str] = {}
for _tone, _words in {
    OK: "ok online ready idle fits healthy up applied resolved good completed",
    INFO: (
        "info mixed allocated alloc mix completing busy mig reserved planned "
        "gpu_added gpu_returned gpu_moved_in mig_relayout mig_mode driver_upgrade "
        "memory_change server_added running spread"
    ),
    WARNING: (
        "warning stale drain drained draining maintenance not_responding notschedulable "
        "reboot_requested reboot_issued invalid invalid_reg powering_down pending "
        "gpu_not_in_nvml gpu_moved_out gpu_replaced identity_change cordoned degraded "
        "memory_pressure disk_pressure pid_pressure network_unavailable poorly_placed cancelled "
        "timeout preempted"
    ),
    CRITICAL: (
        "critical error offline lost down fail failed failing notready gone rejected "
        "gpu_removed unhealthy doesnotfit node_fail out_of_memory"
    ),
    NEUTRAL: "neutral never unknown future powered_down powering_up vm",
}.items():
    for _word in _words.split():
        _TONE_OF[_word] = _tone

_FLAG_RANK = {OK: 0, NEUTRAL: 0, INFO: 1, WARNING: 2, CRITICAL: 3}


def normalise(value: object) -> str:
    """`Not Ready`, `not-ready`, `NOT_READY` -> `notready`-like keys, as the table holds them."""
    return str(value or "").strip().lower().replace(" ", "").replace("-", "")


def state_tone(value: object, flags: Iterable[str] = ()) -> str:
    """The tone of a state word (server, node, GPU, finding severity, change kind, ...).

    `flags` are a node's state flags (Slurm `drain`, `fail`, `not_responding`): the worst of
    the flags and the base state wins, so `idle` + `drain` is a warning, `mixed` is info.
    Unknown words are neutral, never green.
    """
    key = normalise(value)
    tone = _TONE_OF.get(key) or _TONE_OF.get(key.replace("_", ""), NEUTRAL)
    for flag in flags or ():
        flag_tone = _TONE_OF.get(normalise(flag))
        if flag_tone and _FLAG_RANK[flag_tone] > _FLAG_RANK.get(tone, 0):
            tone = flag_tone
    return tone


def tone_colour(tone: str, part: str = "solid") -> str:
    """A tone's colour for figures: `solid` marks, `soft` fills, `ink` text."""
    return PALETTE.get(tone, PALETTE[NEUTRAL])[part]


def relative_luminance(colour: str) -> float:
    """WCAG 2.x relative luminance of `#rrggbb`."""
    channels = [int(colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast_ratio(foreground: str, background: str) -> float:
    """WCAG contrast ratio (1 to 21) of two `#rrggbb` colours."""
    a, b = sorted((relative_luminance(foreground), relative_luminance(background)), reverse=True)
    return (a + 0.05) / (b + 0.05)
