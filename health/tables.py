"""The health pages' tables, declared once for the page and its CSV exports. `/health/`: GPUs
needing action (`health.action`, each with its reason), repeat offenders by GPU, slot and
server, events by GPU model and by rack (rows: the `health.selectors` reads as they come).
`/gpus/`: the inventory's GPU table with why each GPU needs action (`health.action`).
`/gpus/<id>/`: the GPU's servers and slots, events, counters and replacements (rows: what
`health.selectors.gpu_history` returns)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.urls import reverse
from django.utils.html import format_html

from core.formats import badge
from core.forms import FilterForm
from core.tables import Column, Table, iso, when
from inventory.tables import GPU_FILTERS, GPU_TABLE

from .selectors import code_label
from .templatetags.health_tags import event_code


def _server_url(row: Any) -> str | None:
    server_id = row["server_id"] if isinstance(row, dict) else row.server_id
    return reverse("server-detail", args=[server_id]) if server_id else None


def _moment(header: str, get) -> Column:
    """A time: `2026-11-30 07:00` on the page, ISO in the CSV, the exact moment on hover."""
    return Column(
        header, lambda r: iso(get(r)), cell=lambda r: when(get(r)), title=lambda r: iso(get(r))
    )


NEEDING_ACTION_TABLE = Table(
    id="gpus-needing-action",
    filename="gpus-needing-action.csv",
    empty=(
        "No GPU needs action: none is lost or failing NVML, no health finding is open on one, "
        "and no server has a critical finding."
    ),
    noun="GPUs needing action",
    row_class=lambda r: f"sev-{r.severity}",
    columns=(
        Column("Severity", lambda r: r.severity, cell=lambda r: badge(r.severity)),
        Column(
            "GPU",
            lambda r: r.name,
            link=lambda r: reverse("gpu-detail", args=[r.gpu_id]),
        ),
        Column("Serial", lambda r: r.serial or None, mono=True),
        Column("Server", lambda r: r.hostname, link=_server_url),
        Column("Reason", lambda r: r.words),
        Column("Action", lambda r: r.action or None),
        _moment("Since", lambda r: r.since),
    ),
)

_COUNTS = (
    Column("Episodes", lambda r: r["episodes"], numeric=True),
    Column("Events", lambda r: r["events"], numeric=True),
)

GPU_OFFENDERS_TABLE = Table(
    id="offender-gpus",
    filename="repeat-offender-gpus.csv",
    empty="None.",
    columns=(
        Column(
            "Serial",
            lambda r: r["gpu_serial"],
            link=lambda r: reverse("gpu-detail", args=[r["gpu_id"]]) if r["gpu_id"] else None,
            mono=True,
        ),
        Column("Server", lambda r: r["server__hostname"]),
        *_COUNTS,
        _moment("Last", lambda r: r["last"]),
    ),
)

SLOT_OFFENDERS_TABLE = Table(
    id="offender-slots",
    filename="repeat-offender-slots.csv",
    empty="None.",
    columns=(
        Column("Server", lambda r: r["server__hostname"], link=_server_url),
        Column("PCI bus", lambda r: r["pci_bus_id"], mono=True),
        *_COUNTS,
        _moment("Last", lambda r: r["last"]),
    ),
)

SERVER_OFFENDERS_TABLE = Table(
    id="offender-servers",
    filename="repeat-offender-servers.csv",
    empty="None.",
    columns=(
        Column("Server", lambda r: r["server__hostname"], link=_server_url),
        *_COUNTS,
        _moment("Last", lambda r: r["last"]),
    ),
)


def _by(header: str, none: str, table_id: str) -> Table:
    return Table(
        id=table_id,
        filename=f"{table_id}.csv",
        empty="None.",
        columns=(
            Column(header, lambda r: r["group"], cell=lambda r: r["group"] or none),
            *_COUNTS,
        ),
    )


BY_MODEL_TABLE = _by("GPU model", "no GPU", "events-by-model")
BY_RACK_TABLE = _by("Rack", "no rack", "events-by-rack")


# One GPU's page (/gpus/<id>/): rows of `health.selectors.gpu_history` ---------------------


def _server_of(r: dict) -> str | None:
    return reverse("server-detail", args=[r["server"]]) if r.get("server") else None


def _board(board: dict | None) -> str | None:
    return (board.get("serial") or board.get("uuid")) if board else None


def _pair(first: Any, second: Any) -> str:
    return "/".join("—" if v is None else str(v) for v in (first, second))


def _yes_no(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "no")


def _pcie(c) -> str:
    def known(value: Any) -> str:
        return "?" if value is None else str(value)

    return (
        f"Gen{known(c.pcie_link_gen_current)} x{known(c.pcie_link_width_current)} of "
        f"Gen{known(c.pcie_link_gen_max)} x{known(c.pcie_link_width_max)}"
    )


GPU_PLACEMENTS_TABLE = Table(
    id="gpu-placements",
    filename="gpu-placements.csv",
    empty="No placements recorded.",
    columns=(
        Column("Server", lambda r: r["hostname"], link=_server_of),
        Column("PCI bus", lambda r: r["pci_bus_id"] or None, mono=True),
        _moment("From", lambda r: r["start"]),
        Column(
            "Until",
            lambda r: iso(r["end"]),
            cell=lambda r: when(r["end"]) if r["end"] else "now",
            title=lambda r: iso(r["end"]),
        ),
    ),
)


def _holder_cell(e: Any) -> Any:
    """The workload that held the GPU when the event began, linked to its page."""
    if not e.holder:
        return "—"
    return format_html('<a href="{}">{}</a>', e.holder_path, e.holder_words)


HELD_BY = Column(
    "Held by", lambda e: e.holder_words or None, cell=_holder_cell, title=lambda e: e.sentence
)
"""The workload on the GPU at the event (`HealthEvent.holder`, filled by the workloads layer)."""

GPU_EVENTS_TABLE = Table(
    id="gpu-events",
    filename="gpu-events.csv",
    empty="No events.",
    row_class=lambda e: f"sev-{e.severity}",
    columns=(
        Column(
            "Code",
            lambda e: code_label(e.kind, e.code),
            cell=lambda e: event_code(e.kind, e.code, e.message),
        ),
        Column("Severity", lambda e: e.severity, cell=lambda e: badge(e.severity)),
        Column("Server", lambda e: e.server.hostname),
        Column("Count", lambda e: e.count, numeric=True),
        _moment("First", lambda e: e.first_seen),
        _moment("Last", lambda e: e.last_seen),
        Column("Action", lambda e: e.action or None),
        HELD_BY,
        Column("Message", lambda e: e.message, mono=True),
    ),
)


def _gpu_url(e: Any) -> str | None:
    return reverse("gpu-detail", args=[e.gpu_id]) if e.gpu_id else None


RECENT_EVENTS_TABLE = Table(
    id="recent-events",
    filename="health-recent-events.csv",
    empty="No events.",
    row_class=lambda e: f"sev-{e.severity}",
    columns=(
        Column(
            "Code",
            lambda e: code_label(e.kind, e.code),
            cell=lambda e: event_code(e.kind, e.code, e.message),
        ),
        Column("Severity", lambda e: e.severity, cell=lambda e: badge(e.severity)),
        Column("Server", lambda e: e.server.hostname, link=_server_url),
        Column(
            "GPU",
            lambda e: e.gpu.index if e.gpu is not None else (e.pci_bus_id or None),
            link=_gpu_url,
        ),
        _moment("First", lambda e: e.first_seen),
        Column("Count", lambda e: e.count, numeric=True),
        HELD_BY,
    ),
)

GPU_COUNTERS_TABLE = Table(
    id="gpu-counters",
    filename="gpu-counters.csv",
    empty="No counters recorded.",
    columns=(
        _moment("Taken", lambda c: c.taken_at),
        Column("Server", lambda c: c.server.hostname if c.server else None),
        Column(
            "ECC uncorr. (vol/agg)",
            lambda c: _pair(c.ecc_volatile_uncorrected, c.ecc_aggregate_uncorrected),
            numeric=True,
        ),
        Column(
            "ECC corr. (vol/agg)",
            lambda c: _pair(c.ecc_volatile_corrected, c.ecc_aggregate_corrected),
            numeric=True,
        ),
        Column(
            "Rows remap pending/failed",
            lambda c: f"{_yes_no(c.remapped_rows_pending)}/{_yes_no(c.remapped_rows_failure)}",
        ),
        Column("PCIe", _pcie),
        Column("Recovery", lambda c: c.recovery_action or None),
    ),
)

GPU_REPLACEMENTS_TABLE = Table(
    id="gpu-replacements",
    filename="gpu-replacements.csv",
    empty="No replacements.",
    columns=(
        _moment("When", lambda r: r["at"]),
        Column("Server", lambda r: r["hostname"], link=_server_of),
        Column("PCI bus", lambda r: r["pci_bus_id"] or None, mono=True),
        Column("This GPU", lambda r: r["role"]),
        Column("Removed", lambda r: _board(r.get("removed")), mono=True),
        Column("Installed", lambda r: _board(r.get("installed")), mono=True),
    ),
)


# The GPUs page (/gpus/): the inventory's table, and why each GPU needs action -------------

GPU_LIST_TABLE = replace(
    GPU_TABLE,
    columns=(
        *GPU_TABLE.columns,
        Column(
            "Needs action",
            lambda g: g.needs_action.words if g.needs_action else None,
            "action_reason",
            cell=lambda g: _action_cell(g.needs_action),
        ),
    ),
    row_class=lambda g: f"sev-{g.needs_action.severity}" if g.needs_action else "",
)

GPU_LIST_FILTERS = FilterForm(
    fields=(*GPU_FILTERS.fields, "action"),
    labels={**GPU_FILTERS.labels, "action": "Action"},
    placeholders=GPU_FILTERS.placeholders,
    choices=GPU_FILTERS.choices,
)


def _action_cell(action) -> Any:
    if action is None:
        return "—"
    url = reverse("gpu-detail", args=[action.gpu_id])
    return format_html('<a href="{}">{}</a>', url, action.words)
