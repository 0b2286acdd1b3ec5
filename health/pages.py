"""Reads of the health pages: GPUs needing action, events by code over time, repeat offenders
ranked, and totals by model and rack. Each is one aggregate query, whatever the fleet."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, F, Max, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from clusters.models import Finding
from core.figures import FONT, esc
from core.findings import by_severity
from core.palette import CRITICAL, WARNING, tone_colour

from .action import OPEN_HEALTH, gpus_needing_action_by_type, gpus_needing_action_count
from .catalog import event_info, xid_info
from .choices import EventKind
from .models import HealthEvent

OFFENDERS = 20  # rows of each ranking
TIMELINE_DAYS = 30


def gpus_needing_action() -> QuerySet[Finding]:
    """Open health findings, the most serious first, with their GPU and server (one query).

    The rows with a GPU are the GPUs needing action (`health.action.NEEDS_ACTION`); the others
    are about a slot or a server."""
    return by_severity(Finding.objects.filter(OPEN_HEALTH).select_related("gpu", "server"))


def health_overview(*, now: datetime | None = None) -> dict[str, Any]:
    """The overview's health card: GPUs needing action by finding type (with the distinct
    total) and the health events of the last day and week (three queries)."""
    now = now or timezone.now()
    day, week = now - timedelta(days=1), now - timedelta(days=7)
    events = HealthEvent.objects.filter(last_seen__gte=week).aggregate(
        day_episodes=Count("id", filter=Q(last_seen__gte=day)),
        day_events=Sum("count", filter=Q(last_seen__gte=day)),
        day_critical=Count("id", filter=Q(last_seen__gte=day, severity="critical")),
        week_episodes=Count("id"),
        week_events=Sum("count"),
        week_critical=Count("id", filter=Q(severity="critical")),
    )
    return {
        "needing_action": gpus_needing_action_count(),
        "by_type": gpus_needing_action_by_type(),
        "events": [
            {
                "window": window,
                "episodes": events[f"{key}_episodes"] or 0,
                "events": events[f"{key}_events"] or 0,
                "critical": events[f"{key}_critical"] or 0,
            }
            for key, window in (("day", "last day"), ("week", "last week"))
        ],
    }


def _ranked(events: QuerySet[HealthEvent], *keys: str) -> list[dict[str, Any]]:
    return list(
        events.values(*keys)
        .annotate(events=Sum("count"), episodes=Count("id"), last=Max("last_seen"))
        .order_by("-episodes", "-events", *keys)[:OFFENDERS]
    )


OFFENDER_KEYS = {
    "gpus": ("gpu_serial", "gpu_id", "server__hostname"),
    "slots": ("server_id", "server__hostname", "pci_bus_id"),
    "servers": ("server_id", "server__hostname"),
}
"""What a repeat offender is: a GPU (by serial), a slot (server and bus), a server."""


def repeat_offenders(*, since: datetime, by: str) -> list[dict[str, Any]]:
    """GPUs, slots or servers (`by`, a key of OFFENDER_KEYS) ranked by failure episodes since
    `since`, info events left out (one query)."""
    recent = HealthEvent.objects.filter(last_seen__gte=since).exclude(severity="info")
    if by == "gpus":
        recent = recent.exclude(gpu_serial="")
    elif by == "slots":
        recent = recent.exclude(pci_bus_id="")
    return _ranked(recent, *OFFENDER_KEYS[by])


def events_by(*, since: datetime, key: str) -> list[dict[str, Any]]:
    """Events grouped by a GPU model or a rack (one query)."""
    return list(
        HealthEvent.objects.filter(last_seen__gte=since)
        .values(group=F(key))
        .annotate(events=Sum("count"), episodes=Count("id"))
        .order_by("-episodes", "group")
    )


def code_label(kind: str, code: int | None) -> str:
    return f"{EventKind(kind).label} {code}" if code is not None else EventKind(kind).label


def events_figure(*, now: datetime | None = None, days: int = TIMELINE_DAYS) -> dict[str, Any]:
    """Events per day by code as stacked bars; the catalog's meaning on hover (escaped)."""
    now = now or timezone.now()
    rows = (
        HealthEvent.objects.filter(last_seen__gte=now - timedelta(days=days))
        .annotate(day=TruncDate("last_seen"))
        .values("day", "kind", "code")
        .annotate(events=Sum("count"))
        .order_by("kind", "code", "day")
    )
    traces: dict[tuple[str, int | None], dict[str, Any]] = {}
    for row in rows:
        key = (row["kind"], row["code"])
        trace = traces.get(key)
        if trace is None:
            info = event_info(row["kind"], row["code"])
            tone = CRITICAL if info.severity == "critical" else WARNING
            trace = traces[key] = {
                "type": "bar",
                "name": esc(code_label(*key)),
                "x": [],
                "y": [],
                "marker": {"color": tone_colour(tone), "line": {"color": "#ffffff", "width": 1}},
                "hovertemplate": f"{esc(code_label(*key))}: {esc(info.meaning)}"
                "<br>%{x}: %{y} events<extra></extra>",
            }
        trace["x"].append(row["day"].isoformat())
        trace["y"].append(row["events"])
    return {
        "data": list(traces.values()),
        "layout": {
            "barmode": "stack",
            "font": FONT,
            "height": 320,
            "margin": {"l": 50, "r": 20, "t": 10, "b": 40},
            "yaxis": {"title": {"text": "events"}},
            "showlegend": True,
        },
    }


def xid_meaning(code: int | None) -> str:
    """The catalog's meaning of an Xid, for a `title` on hover."""
    return xid_info(code).meaning
