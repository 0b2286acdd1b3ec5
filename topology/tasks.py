"""Celery tasks of the topology layer: rendering the fleet figures. Thin over `render`."""

from __future__ import annotations

import logging

from celery import shared_task
from django.core.cache import cache

from core.tasks import enqueue, retry_policy

from .render import fleet_render

logger = logging.getLogger(__name__)

RENDER_REQUESTED_KEY = "topology:fleet-render-requested"
RENDER_REQUEST_TTL_S = 30


@shared_task(
    acks_late=True,
    time_limit=600,
    soft_time_limit=570,
    **retry_policy(),
)
def render_fleet_figures(names: list[str] | None = None, force: bool = False) -> str:
    """Render the fleet figures whose data moved since their last render.

    Beat runs it every 30 s: a run that finds every figure at the current revision returns
    at once (four small queries: the reconciliation time, two revisions, the rendered keys),
    so it is safe to enqueue often.
    """
    rendered = fleet_render(names=names, force=force)
    return ",".join(rendered) if rendered else "unchanged"


def enqueue_fleet_render(names: list[str] | None = None) -> None:
    """Ask for a render from a request, never waiting on a broker.

    Embedded mode (tasks eager, no worker): render the named figures here and now. With a
    broker: enqueue one render of every stale figure at most once per 30 s per process, so
    pages polling a pending figure do not flood the queue; a broker that is away is logged
    and left to beat.
    """
    if render_fleet_figures.app.conf.task_always_eager:
        render_fleet_figures.apply(kwargs={"names": names})
        return
    if not cache.add(RENDER_REQUESTED_KEY, True, timeout=RENDER_REQUEST_TTL_S):
        return
    if not enqueue(render_fleet_figures):  # the broker is away: beat renders once it is back
        cache.delete(RENDER_REQUESTED_KEY)
