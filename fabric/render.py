"""The fabric page's figures: a large fabric's rendered once per revision of what it draws
and stored, a small one's drawn per request.

A fabric drawn at switch level or above sums every one of its cables (hundreds of thousands,
seconds at 25,000 servers), so its figure is rendered when its data moves, by the worker
that runs the findings pass after each change, and stored under the revision it saw; the
page then reads it in one query. A page that finds it stale renders and stores it itself,
so a figure is never older than its data. A fabric drawn in detail (MAX_MARKS marks at
most) names servers and racks, which move with every report: it costs less to draw it per
request than to track those.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.figures import Figure
from inventory.services import revision_get

from .figures import fabric_figure
from .models import Fabric, FabricFigure
from .selectors import fabric_figures_facts, fabrics_degraded_keys

logger = logging.getLogger(__name__)


def figure_revision(fabric_revision: int, degraded: Iterable[str]) -> str:
    """What a folded figure draws, as one key: the fabric revision (snapshots, bindings,
    names, tiers) and the cables the open findings call degraded (the findings pass moves
    those without a new revision)."""
    digest = hashlib.sha256("\n".join(sorted(degraded)).encode()).hexdigest()[:16]
    return f"f{fabric_revision}.d{digest}"


def fabric_figures(fabrics: list[Fabric]) -> dict[int, Figure]:
    """Each fabric's figure: stored when fresh, else drawn (and stored when folded). A fixed
    number of queries whatever the number of fabrics; none reads a cable when every folded
    figure is fresh.

    The revision is read before the data: if the data moves during a render, the stored
    key is the older one and the next read renders again, never the other way round.
    """
    if not fabrics:
        return {}
    revision = revision_get(name="fabric")
    degraded = fabrics_degraded_keys([fabric.name for fabric in fabrics])
    keys = {
        fabric.pk: figure_revision(revision, degraded.get(fabric.name, ())) for fabric in fabrics
    }
    figures: dict[int, Figure] = {
        fabric_id: figure
        for fabric_id, stored, figure in FabricFigure.objects.filter(
            fabric_id__in=list(keys)
        ).values_list("fabric_id", "revision", "figure")
        if stored == keys[fabric_id]
    }
    todo = [fabric for fabric in fabrics if fabric.pk not in figures]
    if not todo:
        return figures
    started = time.monotonic()
    facts = fabric_figures_facts(todo, degraded=degraded)
    duration_ms = int((time.monotonic() - started) * 1000)
    rendered = []
    for fabric in todo:
        began = time.monotonic()
        figure = figures[fabric.pk] = fabric_figure(facts[fabric.pk])
        if figure["layout"]["meta"].get("aggregated"):
            rendered.append(
                FabricFigure(
                    fabric_id=fabric.pk,
                    revision=keys[fabric.pk],
                    figure=figure,
                    rendered_at=timezone.now(),
                    duration_ms=duration_ms + int((time.monotonic() - began) * 1000),
                )
            )
    if rendered:
        _store(rendered)
    return figures


def _store(rendered: list[FabricFigure]) -> None:
    """Upsert in one statement; a fabric deleted meanwhile is simply not stored."""
    try:
        with transaction.atomic():
            FabricFigure.objects.bulk_create(
                rendered,
                update_conflicts=True,
                unique_fields=["fabric"],
                update_fields=["revision", "figure", "rendered_at", "duration_ms"],
            )
    except IntegrityError:
        logger.info("a fabric went while its figure was drawn; not stored")
        return
    for row in rendered:
        logger.info(
            "rendered fabric figure %s at %s in %d ms", row.fabric_id, row.revision, row.duration_ms
        )


def fabric_figures_render(fabric_ids: Iterable[int] | None = None) -> None:
    """Render the stale folded figures of these fabrics (all by default): the worker's
    part, so that the page finds them fresh."""
    fabrics = Fabric.objects.defer("node_name_map", "node_names")
    if fabric_ids is not None:
        fabrics = fabrics.filter(pk__in=list(fabric_ids))
    fabric_figures(list(fabrics))
