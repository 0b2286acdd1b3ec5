"""Template helpers: units (bytes, watts, Mbit/s), sortable headers, state badges."""

from __future__ import annotations

from django import template
from django.utils.html import format_html

from core.palette import normalise, state_tone

register = template.Library()

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


@register.filter
def bytes_iec(value) -> str:
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


@register.filter
def speed(mbps) -> str:
    if not mbps:
        return "—"
    return f"{mbps / 1000:g} Gb/s" if mbps >= 1000 else f"{mbps} Mb/s"


@register.filter
def dash(value) -> str:
    return "—" if value in (None, "") else value


@register.filter
def yesno_dash(value) -> str:
    return {True: "yes", False: "no"}.get(value, "—")


@register.simple_tag
def sort_link(column, current: str, base_query: str):
    """A header link that sorts by the column, toggling direction when already sorted."""
    if not column.sort:
        return column.label
    descending = current == column.sort
    target = f"-{column.sort}" if descending else column.sort
    arrow = " ▲" if current == column.sort else (" ▼" if current == f"-{column.sort}" else "")
    prefix = f"{base_query}&" if base_query else ""
    return format_html('<a href="?{}sort={}">{}{}</a>', prefix, target, column.label, arrow)


@register.simple_tag
def badge(value, label=None, flags=()):
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


@register.filter
def tone(value, flags=()) -> str:
    """`{{ finding.severity|tone }}`: the palette tone of a state word (ok/info/warning/...)."""
    return state_tone(value, flags)


@register.filter
def get_item(mapping, key):
    """`{{ counts|get_item:"critical" }}`: a dict lookup by a variable key."""
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def make_list_words(value: str) -> list[str]:
    return value.split()


NOT_FILTERS = frozenset({"page", "sort", "format", "open", "tab", "page_size"})
"""Query keys that page, sort, export or pick a tab: they never make a list "filtered"."""


@register.simple_tag
def active_filters(query) -> list[tuple[str, str]]:
    """`{% active_filters request.GET as applied %}`: the (key, value) filters that are set.

    An empty list means the list is the whole set, so an empty result is a truly empty
    inventory (setup text), not a search that matched nothing (templates/_empty_state.html).
    """
    return [
        (key, value.strip())
        for key, values in query.lists()
        if key not in NOT_FILTERS
        for value in values
        if value.strip()
    ]
