"""The findings list tables (open, resolved) and their filter form, declared once.

Each column serves the page and the CSV export alike (core.tables); rows come from
`selectors.finding_list()`. The type column shows each type's words (`choices.FindingType`).
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

from django.contrib.humanize.templatetags.humanize import naturaltime
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from core.formats import badge
from core.forms import FilterForm
from core.tables import Column, Table, iso, when


def _finding_about(f) -> SafeString:
    parts = []
    if f.server:
        url = reverse("server-detail", args=[f.server_id])
        parts.append(format_html('<a href="{}">{}</a>', url, f.server.hostname))
    if f.node:
        parts.append(
            format_html(
                '<a href="{}">{}</a> <span class="muted">{}</span>',
                reverse("node-detail", args=[f.node_id]),
                f.node.name,
                f.node.cluster.name,
            )
        )
    elif f.cluster:
        query = urlencode({"cluster": f.cluster.name})
        parts.append(
            format_html('<a href="{}?{}">{}</a>', reverse("node-list"), query, f.cluster.name)
        )
    return mark_safe("<br>".join(parts))  # noqa: S308 (each part built by format_html)


def _finding_about_text(f) -> str:
    names = [f.server.hostname] if f.server else []
    if f.node:
        names.append(f"{f.node.cluster.name}/{f.node.name}")
    elif f.cluster:
        names.append(f.cluster.name)
    return " ".join(names)


def _finding_type(f) -> SafeString:
    reopened = (
        format_html(' <span class="muted" title="reopened">↻{}</span>', f.reopened_count)
        if f.reopened_count
        else ""
    )
    marks = []
    if f.acknowledged:
        marks.append(badge("info", "acknowledged"))
    if f.silenced():
        marks.append(badge("neutral", "silenced"))
    return format_html(
        '<a href="{}">{}</a>{} {}',
        reverse("finding-detail", args=[f.pk]),
        f.get_type_display(),
        reopened,
        mark_safe(" ".join(marks)),  # noqa: S308 (badges escape their text)
    )


def _finding_message(f) -> SafeString:
    return format_html('<a href="{}">{}</a>', reverse("finding-detail", args=[f.pk]), f.message)


def _moment(value) -> SafeString | str:
    """The time itself, then how long ago: "3 minutes ago" alone says nothing once copied."""
    if not value:
        return "—"
    return format_html('{} <span class="muted">({})</span>', when(value), naturaltime(value))


def _seen(attr: str):
    return Column(
        {"first_seen": "First seen", "last_seen": "Last seen", "resolved_at": "Resolved"}[attr],
        lambda f: iso(getattr(f, attr)),
        attr,
        cell=lambda f: _moment(getattr(f, attr)),
        title=lambda f: iso(getattr(f, attr)),
    )


_FINDING_COLUMNS = (
    Column("Severity", lambda f: f.severity, "severity_rank", cell=lambda f: badge(f.severity)),
    Column("Type", lambda f: f.get_type_display(), "type", cell=_finding_type),
    Column("About", _finding_about_text, cell=_finding_about),
    Column("Message", lambda f: f.message, cell=_finding_message),
    _seen("first_seen"),
    _seen("last_seen"),
)

OPEN_FINDING_TABLE = Table(
    id="findings",
    filename="findings.csv",
    default_sort="severity_rank",
    empty="Nothing disagrees. Every node has its server and every count matches.",
    noun="open findings",
    clear="?open=true",
    row_class=lambda f: f"sev-{f.severity}",
    columns=_FINDING_COLUMNS,
)

RESOLVED_FINDING_TABLE = Table(
    id="findings",
    filename="findings.csv",
    default_sort="-last_seen",
    empty="No resolved findings.",
    noun="resolved findings",
    clear="?open=false",
    row_class=lambda f: f"sev-{f.severity}",
    columns=(*_FINDING_COLUMNS, _seen("resolved_at")),
)


def _select(f) -> SafeString:
    # Outside the table's markup, the checkboxes belong to the bulk bar's form by its id.
    return format_html(
        '<input type="checkbox" class="bulk-select" name="ids" value="{}" form="bulk-form" '
        'aria-label="Select {} {}">',
        f.pk,
        f.get_type_display(),
        f.subject,
    )


SELECT_COLUMN = Column("Select", lambda f: f.pk, cell=_select)
"""A checkbox per finding, for staff's bulk actions (the page only, never the CSV)."""

SELECTABLE_FINDING_TABLE = replace(
    OPEN_FINDING_TABLE, columns=(SELECT_COLUMN, *OPEN_FINDING_TABLE.columns)
)


def finding_table(*, open_only: bool, selectable: bool = False) -> Table:
    """Open findings have no Resolved column; the resolved list (and its CSV) has one. Staff
    get a checkbox per open finding (`selectable`), for the bulk actions."""
    if not open_only:
        return RESOLVED_FINDING_TABLE
    return SELECTABLE_FINDING_TABLE if selectable else OPEN_FINDING_TABLE


FINDING_FILTERS = FilterForm(
    fields=("type", "severity", "cluster"),
    hidden=("open",),
)
