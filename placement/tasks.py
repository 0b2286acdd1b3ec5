"""Celery tasks of the placement app: keeping the per-server summaries fresh. Thin over
`summaries`."""

from __future__ import annotations

from celery import shared_task

from core.tasks import retry_policy

from .summaries import placement_summaries_refresh


@shared_task(
    acks_late=True,
    ignore_result=True,
    time_limit=600,
    soft_time_limit=570,
    **retry_policy(),
)
def refresh_placement_summaries(limit: int = 50_000) -> int:
    """Rebuild the placement summaries that reports made stale (one query when none is). A
    server whose summary cannot be built is logged and left to its rows until its report
    changes; the others are rebuilt (`summaries.placement_summaries_refresh`)."""
    return placement_summaries_refresh(limit=limit)
