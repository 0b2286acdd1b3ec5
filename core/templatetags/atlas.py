"""Template helpers: units (bytes, watts, Mbit/s), sortable headers, state badges."""

from __future__ import annotations

from django import template
from django.utils.html import format_html, json_script

from core import formats
from core.figures import figure_themes
from core.palette import state_tone

register = template.Library()

register.filter("bytes_iec", formats.bytes_iec)
register.filter("speed", formats.speed)
register.filter("dash", formats.dash)
register.filter("yesno_dash", formats.yesno_dash)
register.simple_tag(formats.badge, name="badge")


@register.simple_tag
def sort_link(column, current: str, base_query: str):
    """A header link that sorts by the column, toggling direction when already sorted."""
    if not column.sort:
        return column.header
    descending = current == column.sort
    target = f"-{column.sort}" if descending else column.sort
    arrow = " ▲" if current == column.sort else (" ▼" if current == f"-{column.sort}" else "")
    prefix = f"{base_query}&" if base_query else ""
    return format_html('<a href="?{}sort={}">{}{}</a>', prefix, target, column.header, arrow)


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


@register.simple_tag
def figure_themes_json() -> str:
    """core.figures.figure_themes() for static/js/figures.js, as JSON (never script)."""
    return json_script(figure_themes(), "atlas-figure-themes")
