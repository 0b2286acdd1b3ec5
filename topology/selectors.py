"""Reads of the topology app's own tables."""

from __future__ import annotations

from .models import RenderedFigure


def rendered_figure_index() -> dict[str, dict]:
    """Each rendered fleet figure's name, revision, render time and duration, without the
    figure itself (large): one query."""
    rows = RenderedFigure.objects.values("name", "revision", "rendered_at", "duration_ms")
    return {row["name"]: row for row in rows}
