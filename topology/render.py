"""Rendering figures: the fleet's once per data revision (in Celery), a server's per request.

Fleet figures read the whole fleet, so a page never builds them: the `render_fleet_figures`
task does when the data moved, and stores each under the revision it saw. Per-server figures
are a few dozen marks from one prefetched server and cost less than caching them would.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.utils import timezone

from clusters.models import ReconcileState
from inventory.choices import GpuStatus
from inventory.models import Gpu, Server
from inventory.services import revision_get

from .figures import (
    Figure,
    FleetRows,
    fleet_hierarchy_figure,
    interconnect_matrix_figure,
    mig_layout_figure,
    nvlink_graph_figure,
    rack_figure,
    server_node_map_figure,
)
from .interconnect import server_interconnect
from .models import RenderedFigure
from .selectors import fleet_rows

logger = logging.getLogger(__name__)

FLEET_FIGURES: dict[str, Callable[[FleetRows], Figure]] = {
    "fleet-hierarchy": fleet_hierarchy_figure,
    "server-node-map": server_node_map_figure,
    "racks": rack_figure,
}
"""Fleet figures by the name the API and pages use (`/api/v1/figures/<name>/`)."""


def fleet_revision() -> str:
    """The data the fleet figures are drawn from, as one key.

    The inventory and node-set revisions move when reports and snapshots change something;
    bindings move only in the reconciliation that follows, so its time is part of the key
    (otherwise a render between a snapshot and its reconciliation would stay, unbound, until
    the next change).
    """
    reconciled_at = (
        ReconcileState.objects.filter(id=1).values_list("reconciled_at", flat=True).first()
    )
    reconciled = int(reconciled_at.timestamp() * 1000) if reconciled_at else 0
    return f"i{revision_get(name='inventory')}.n{revision_get(name='nodes')}.r{reconciled}"


def fleet_figures_stale(names: Iterable[str] | None = None, *, revision: str = "") -> list[str]:
    """The named fleet figures (all by default) not rendered at the current revision."""
    names = _known(names)
    revision = revision or fleet_revision()
    rendered = dict(RenderedFigure.objects.filter(name__in=names).values_list("name", "revision"))
    return [name for name in names if rendered.get(name) != revision]


def fleet_render(*, names: Iterable[str] | None = None, force: bool = False) -> list[str]:
    """Render the stale fleet figures (or all named ones, with `force`); returns their names.

    The revision is read before the rows: if the data moves during the render, the stored
    key is the older one and the next run renders again, never the other way round.
    Idempotent: a second run at the same revision renders nothing.
    """
    names = _known(names)
    revision = fleet_revision()
    todo = names if force else fleet_figures_stale(names, revision=revision)
    if not todo:
        return []
    started = time.monotonic()
    rows = fleet_rows()
    load_ms = (time.monotonic() - started) * 1000
    for name in todo:
        began = time.monotonic()
        figure = FLEET_FIGURES[name](rows)
        duration_ms = int(load_ms + (time.monotonic() - began) * 1000)
        RenderedFigure.objects.update_or_create(
            name=name,
            defaults={
                "revision": revision,
                "figure": figure,
                "rendered_at": timezone.now(),
                "duration_ms": duration_ms,
            },
        )
        logger.info("rendered fleet figure %s at %s in %d ms", name, revision, duration_ms)
    return todo


def fleet_figure_get(*, name: str) -> RenderedFigure | None:
    """The last render of a fleet figure, whatever its revision; None before the first."""
    return RenderedFigure.objects.filter(name=name).first()


def _known(names: Iterable[str] | None) -> list[str]:
    names = list(FLEET_FIGURES) if names is None else list(names)
    unknown = [name for name in names if name not in FLEET_FIGURES]
    if unknown:
        raise ValueError(f"unknown fleet figure(s): {', '.join(unknown)}")
    return names


def mig_layout_rows(gpus: Iterable[Gpu]) -> list[dict[str, Any]]:
    """The plain GPU rows `mig_layout_figure` takes, from GPUs with prefetched MIG devices."""
    return [
        {
            "index": gpu.index,
            "name": gpu.name,
            "uuid": gpu.uuid,
            "mig_enabled": bool(gpu.mig_mode_current),
            "mig_devices": [
                {
                    "uuid": mig.uuid,
                    "profile": mig.profile,
                    "gpu_instance_id": mig.gpu_instance_id,
                    "compute_instance_id": mig.compute_instance_id,
                    "placement_start": mig.placement_start,
                    "placement_size": mig.placement_size,
                    "memory_bytes": mig.memory_bytes,
                }
                for mig in gpu.mig_devices.all()
            ],
        }
        for gpu in gpus
        if gpu.status != GpuStatus.LOST
    ]


def server_figures(
    server: Server, *, interconnect: dict[str, Any] | None = None
) -> dict[str, Figure]:
    """The server page's figures, keyed `interconnect_matrix`, `nvlink_graph`, `mig_layout`.

    Takes a server from `inventory.selectors.server_detail()` (GPUs with MIG devices, NICs
    and links prefetched: no further queries) and, if the view has it, its
    `server_interconnect`. A key is present only when there is something to draw: the
    matrix with any GPU or NIC, the graph with two GPUs or more, the MIG layout with a GPU
    in MIG mode.
    """
    interconnect = interconnect if interconnect is not None else server_interconnect(server)
    figures: dict[str, Figure] = {}
    if interconnect["devices"]:
        figures["interconnect_matrix"] = interconnect_matrix_figure(interconnect)
    if sum(1 for d in interconnect["devices"] if d["kind"] == "gpu") >= 2:
        figures["nvlink_graph"] = nvlink_graph_figure(interconnect)
    gpus = mig_layout_rows(server.gpus.all())
    if any(g["mig_enabled"] or g["mig_devices"] for g in gpus):
        figures["mig_layout"] = mig_layout_figure(gpus)
    return figures
