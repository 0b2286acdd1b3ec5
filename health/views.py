"""The health pages: `/health/` (the fleet) and `/gpus/<id>/` (one GPU's lifecycle)."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from . import pages
from .rules import Policy
from .selectors import gpu_history


@login_required
def health_page(request: HttpRequest) -> HttpResponse:
    since = timezone.now() - Policy().server_window
    return render(
        request,
        "health/health.html",
        {
            "section": "health",
            "needing_action": list(pages.gpus_needing_action()),
            "figure": pages.events_figure(),
            "offenders": pages.repeat_offenders(since=since),
            "by_model": pages.events_by(since=since, key="gpu__name"),
            "by_rack": pages.events_by(since=since, key="server__rack"),
            "window_days": (timezone.now() - since) // timedelta(days=1),
        },
    )


@login_required
def gpu_page(request: HttpRequest, pk: int) -> HttpResponse:
    history = gpu_history(gpu_id=pk)
    if history is None:
        raise Http404("no such GPU")
    return render(request, "health/gpu.html", {"section": "gpu-list", **history})
