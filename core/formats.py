"""How values read on a page: units, dashes for nothing, state badges.

Plain functions, so a template filter and a table cell (core.tables) show a value the same way.
"""

from __future__ import annotations

from typing import Any

from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.palette import normalise, state_tone

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def bytes_iec(value: Any) -> str:
    """80 GiB, 2 TiB: memory as people read it."""
    if value in (None, ""):
        return "—"
    value = float(value)
    unit = 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    text = f"{value:.1f}".rstrip("0").rstrip(".") if unit else f"{int(value)}"
    return f"{text} {_UNITS[unit]}"


def speed(mbps: Any) -> str:
    if not mbps:
        return "—"
    return f"{mbps / 1000:g} Gb/s" if mbps >= 1000 else f"{mbps} Mb/s"


def dash(value: Any) -> Any:
    """An em dash for nothing (None or empty text); 0 stays 0."""
    return "—" if value in (None, "") else value


def yesno_dash(value: Any) -> str:
    return {True: "yes", False: "no"}.get(value, "—")


def badge(value: Any, label: Any = None, flags: Any = ()) -> SafeString:
    """A state word as a badge, coloured by its tone: `core.palette.state_tone`, the one mapping.

    `flags` are a node's state flags, so `{% badge n.state n.raw_state flags=n.state_flags %}`
    shows a drained idle node as a warning, not as green.
    """
    return format_html(
        '<span class="badge {}" data-state="{}">{}</span>',
        state_tone(value, flags),
        normalise(value) or "unknown",
        label or value or "unknown",
    )
