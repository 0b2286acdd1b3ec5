"""What the workloads layer forgets, and what it keeps of it.

Ended workloads are history for `ATLAS_WORKLOAD_RETENTION_DAYS` (the GPU page's "who used it
before it failed"), then summed into `WorkloadSummary` (per cluster, day of end, kind, user
and account: how many, GPU-seconds, how they ended) and deleted with their allocations. The
sums and the deletes commit together, batch by batch, so a pass that fails repeats a batch
whole or not at all, and a second pass finds nothing left to add: summarising twice is
summarising once.

GPU processes and pod devices are facts of now: a server silent for longer than
`ATLAS_PROCESS_FACTS_MAX_AGE_S` says nothing about now, so its rows go (the findings they
raised resolve on the next findings pass; each finding kept what a person needs).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Coalesce

from inventory.models import Server

from ..choices import TERMINAL_STATES
from ..models import Allocation, GpuProcess, PodDevice, Workload, WorkloadSummary

BATCH = 2000

_Key = tuple[int, date, str, str, str]


def workloads_summarise(*, now: datetime, batch: int = BATCH) -> int:
    """Sum the ended workloads older than the retention window into the daily summaries and
    delete them (with their allocations). Returns the number of workloads summarised."""
    cutoff = now - timedelta(days=settings.ATLAS_WORKLOAD_RETENTION_DAYS)
    done = 0
    while True:
        with transaction.atomic():
            rows = list(
                Workload.objects.filter(state__in=sorted(TERMINAL_STATES))
                .annotate(end=Coalesce("ended_at", "last_seen"))
                .filter(end__lt=cutoff)
                .order_by("id")
                .values(
                    "id",
                    "cluster_id",
                    "kind",
                    "user",
                    "account",
                    "state",
                    "end",
                    "started_at",
                    "gpu_count",
                )[:batch]
            )
            if not rows:
                return done
            _summarise([dict(r) for r in rows])
            Workload.objects.filter(id__in=[r["id"] for r in rows]).delete()
        done += len(rows)
        if len(rows) < batch:
            return done


def _gpu_seconds(rows: list[dict]) -> dict[int, int]:
    """Per workload: GPUs held x time held, from its allocations (each until it was given
    back, or until the workload ended); a workload known by count alone: its count x its run."""
    ends = {r["id"]: r["end"] for r in rows}
    seconds: dict[int, float] = defaultdict(float)
    allocated: set[int] = set()
    for wid, since, until in Allocation.objects.filter(workload_id__in=list(ends)).values_list(
        "workload_id", "since", "until"
    ):
        allocated.add(wid)
        stop = until or ends[wid]
        if since is not None and stop is not None:
            seconds[wid] += max(0.0, (stop - since).total_seconds())
    for r in rows:
        if r["id"] not in allocated and r["started_at"] and r["end"] and r["gpu_count"]:
            run = max(0.0, (r["end"] - r["started_at"]).total_seconds())
            seconds[r["id"]] = r["gpu_count"] * run
    return {wid: round(s) for wid, s in seconds.items()}


def _summarise(rows: list[dict]) -> None:
    seconds = _gpu_seconds(rows)
    sums: dict[_Key, WorkloadSummary] = {}
    for r in rows:
        key = (r["cluster_id"], r["end"].astimezone(UTC).date(), r["kind"], r["user"], r["account"])
        summary = sums.get(key)
        if summary is None:
            summary = sums[key] = WorkloadSummary(
                cluster_id=key[0], day=key[1], kind=key[2], user=key[3], account=key[4], states={}
            )
        summary.workloads += 1
        summary.gpu_seconds += seconds.get(r["id"], 0)
        summary.states[r["state"]] = summary.states.get(r["state"], 0) + 1
    existing = WorkloadSummary.objects.select_for_update().filter(
        cluster_id__in={k[0] for k in sums}, day__in={k[1] for k in sums}
    )
    for old in existing:
        new = sums.get((old.cluster_id, old.day, old.kind, old.user, old.account))
        if new is None:
            continue
        new.workloads += old.workloads
        new.gpu_seconds += old.gpu_seconds
        for state, n in (old.states or {}).items():
            new.states[state] = new.states.get(state, 0) + n
    WorkloadSummary.objects.bulk_create(
        list(sums.values()),
        update_conflicts=True,
        unique_fields=["cluster", "day", "kind", "user", "account"],
        update_fields=["workloads", "gpu_seconds", "states"],
    )


def process_facts_prune(*, now: datetime) -> int:
    """Drop the GPU processes and pod devices of servers whose last report is older than
    `ATLAS_PROCESS_FACTS_MAX_AGE_S`. Returns the number of rows dropped (two queries)."""
    cutoff = now - timedelta(seconds=settings.ATLAS_PROCESS_FACTS_MAX_AGE_S)
    silent = Server.objects.filter(
        Q(last_report__isnull=True) | Q(last_report__received_at__lt=cutoff)
    ).values("id")
    processes, _ = GpuProcess.objects.filter(server_id__in=silent).delete()
    devices, _ = PodDevice.objects.filter(server_id__in=silent).delete()
    return processes + devices
