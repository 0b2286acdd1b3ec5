"""The health pages: `/health/` (the fleet), `/gpus/` (the GPU list, with why each GPU needs
action) and `/gpus/<id>/` (one GPU's lifecycle)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import timezone

from core.tables import table_page, tables_page
from inventory.selectors import gpu_list as inventory_gpu_list

from . import selectors, tables
from .filters import GpuActionFilter
from .rules import Policy


@login_required
def health_page(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """`/health/`: its tables (each also a CSV, `?format=csv&table=<id>`) and the events figure."""
    window = Policy().server_window
    since = timezone.now() - window

    def offenders(by: str):
        return lambda: selectors.repeat_offenders(since=since, by=by)

    return tables_page(
        request,
        tables={
            "needing_action": (tables.NEEDING_ACTION_TABLE, selectors.gpus_needing_action),
            "recent_events": (tables.RECENT_EVENTS_TABLE, selectors.recent_gpu_events),
            "offender_gpus": (tables.GPU_OFFENDERS_TABLE, offenders("gpus")),
            "offender_slots": (tables.SLOT_OFFENDERS_TABLE, offenders("slots")),
            "offender_servers": (tables.SERVER_OFFENDERS_TABLE, offenders("servers")),
            "by_model": (
                tables.BY_MODEL_TABLE,
                lambda: selectors.events_by(since=since, key="gpu__name"),
            ),
            "by_rack": (
                tables.BY_RACK_TABLE,
                lambda: selectors.events_by(since=since, key="server__rack"),
            ),
        },
        template="health/health.html",
        context=lambda: {
            "section": "health",
            "figure": selectors.events_figure(),
            "window_days": window // timedelta(days=1),
        },
    )


@login_required
def gpu_page(
    request: HttpRequest,
    pk: int,
    *,
    template: str = "health/gpu.html",
    extra: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> HttpResponse | StreamingHttpResponse:
    """`/gpus/<id>/`: one GPU's lifecycle, its tables each also a CSV (`?format=csv&table=`).

    A reader above health/ adds what it knows (topology: the workloads) with `extra`, given
    the GPU's history, and a `template` extending this one; neither runs for a CSV export.
    """
    history = selectors.gpu_history(gpu_id=pk)
    if history is None:
        raise Http404("no such GPU")
    return tables_page(
        request,
        tables={
            "placements": (tables.GPU_PLACEMENTS_TABLE, lambda: history["placements"]),
            "events": (tables.GPU_EVENTS_TABLE, lambda: history["events"]),
            "counters": (tables.GPU_COUNTERS_TABLE, lambda: history["counters"]),
            "replacements": (tables.GPU_REPLACEMENTS_TABLE, lambda: history["replacements"]),
        },
        template=template,
        context=lambda: {"section": "gpu-list", **history, **(extra(history) if extra else {})},
    )


def _with_actions(gpus: list) -> list:
    for gpu, action in zip(gpus, selectors.action_rows(gpus), strict=True):
        gpu.needs_action = action
    return gpus


@login_required
def gpu_list(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """`/gpus/`: the inventory's GPU list, each GPU with its reason to act (`health.action`);
    `?action=needed` lists the GPUs needing action, the count the health page shows."""
    return table_page(
        request,
        table=tables.GPU_LIST_TABLE,
        filterset=GpuActionFilter(
            request.GET, queryset=selectors.annotate_action(inventory_gpu_list())
        ),
        filters=tables.GPU_LIST_FILTERS,
        template="inventory/gpu_list.html",
        context=lambda: {"needing_action": selectors.gpus_needing_action_count()},
        prepare=_with_actions,
    )
