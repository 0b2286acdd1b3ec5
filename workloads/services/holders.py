"""Health events named by the workload that held their GPU when they began.

Health sits below workloads and never reads them, so this layer copies the holder into
`HealthEvent.holder` (a plain, denormalised record the health page, the GPU page, webhooks
and alerts show as is). Run after each `record_health` pass (`config/celery.py`) and by beat
as the safety net: events whose holder is unset and that were seen within `LOOKBACK` are
looked at again, so a jobs snapshot that arrives after the event still names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from health.models import HealthEvent
from workloads.describe import workload_label

from ..holders import HeldSpan, HolderIndex
from ..models import Allocation

LOOKBACK = timedelta(days=2)
"""How far back an unnamed event is still looked at: a jobs listing arrives within minutes."""

BATCH = 2000
"""Events per batch: one query for their allocations, one bulk update."""


def event_holders_name(*, since: datetime | None = None, now: datetime | None = None) -> int:
    """Fill `holder` of the GPU events seen since `since` (default: `LOOKBACK` ago) that have
    none; returns how many were named. Three queries a batch (events, their allocations, the
    update), never one per event."""
    since = since or (now or timezone.now()) - LOOKBACK
    pending = (
        # `last_seen` is indexed, and an episode seen since `since` may have begun before it
        HealthEvent.objects.filter(holder__isnull=True, last_seen__gte=since)
        .filter(Q(gpu__isnull=False) | ~Q(gpu_serial=""))
        .order_by("id")
    )
    named = 0
    last_id = 0
    while True:
        events = list(
            pending.filter(id__gt=last_id).only("id", "gpu_id", "gpu_serial", "first_seen")[:BATCH]
        )
        if not events:
            return named
        last_id = events[-1].pk
        index = HolderIndex(
            held_spans(
                gpu_ids={e.gpu_id for e in events if e.gpu_id is not None},
                serials={e.gpu_serial for e in events if e.gpu_serial},
                earliest=min(e.first_seen for e in events),
                latest=max(e.first_seen for e in events),
            )
        )
        changed = []
        for event in events:
            holder = index.holder_at(event.gpu_id, event.gpu_serial, event.first_seen)
            if holder is not None:
                event.holder = holder
                changed.append(event)
        HealthEvent.objects.bulk_update(changed, ["holder"])
        named += len(changed)


def gpu_holders_at(
    moments: Sequence[tuple[int | None, str, datetime]],
) -> list[dict[str, Any] | None]:
    """The holder (as `HealthEvent.holder`) of each (GPU id, GPU serial, moment), or None:
    what a webhook body or an alert about a GPU names. One query, none without moments."""
    wanted = [m for m in moments if m[0] is not None or m[1]]
    if not wanted:
        return [None] * len(moments)
    index = HolderIndex(
        held_spans(
            gpu_ids={g for g, _s, _at in wanted if g is not None},
            serials={s for _g, s, _at in wanted if s},
            earliest=min(at for _g, _s, at in wanted),
            latest=max(at for _g, _s, at in wanted),
        )
    )
    return [index.holder_at(gpu, serial, at) for gpu, serial, at in moments]


def held_spans(
    *, gpu_ids: set[int], serials: set[str], earliest: datetime, latest: datetime
) -> list[HeldSpan]:
    """The allocations on these GPUs (by row or serial) that overlap [earliest, latest]:
    one query."""
    rows = (
        Allocation.objects.filter(Q(gpu_id__in=gpu_ids) | Q(gpu_serial__in=serials))
        .filter(since__lte=latest)
        .filter(Q(until__isnull=True) | Q(until__gt=earliest))
        .values_list(
            "gpu_id",
            "gpu_serial",
            "since",
            "until",
            "workload_id",
            "workload__scheduler_id",
            "workload__user",
            "workload__account",
            "workload__kind",
            "workload__cluster__name",
        )
    )
    return [
        HeldSpan(
            gpu_id,
            serial,
            since,
            until,
            {
                "workload_id": wid,
                "scheduler_id": sid,
                "user": user,
                "account": account,
                "kind": kind,
                "cluster": cluster,
                "words": workload_label(kind, sid, user),
            },
        )
        for gpu_id, serial, since, until, wid, sid, user, account, kind, cluster in rows
    ]
