"""The health page's tables, declared once for the page and its CSV exports: GPUs needing
action (open health findings), repeat offenders by GPU, slot and server, events by GPU model
and by rack. Rows are the `health.pages` reads as they come (findings, or aggregate dicts)."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from core.formats import badge
from core.tables import Column, Table, iso, when


def _gpu_url(f) -> str | None:
    return reverse("gpu-detail", args=[f.gpu_id]) if f.gpu_id else None


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
    empty="No GPU needs an action: no fatal event, repeat failure or error counter asks for one.",
    noun="GPUs needing action",
    row_class=lambda f: f"sev-{f.severity}",
    columns=(
        Column("Severity", lambda f: f.severity, cell=lambda f: badge(f.severity)),
        Column(
            "GPU",
            lambda f: (f.gpu.serial or f.gpu.uuid) if f.gpu else None,
            link=_gpu_url,
            mono=True,
        ),
        Column(
            "Server",
            lambda f: f.server.hostname if f.server else None,
            link=_server_url,
        ),
        Column("Reason", lambda f: f.message),
        Column("Action", lambda f: f.action or None),
        _moment("Since", lambda f: f.first_seen),
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
