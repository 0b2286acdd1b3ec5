"""Reads of the workloads layer: lists, one workload, who holds a GPU now, recent workloads.

Each costs a fixed number of queries however many workloads and allocations there are: the
list is one query for the page and one for its allocations (prefetched, one row per GPU),
the holders and recent workloads one query each.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet, Subquery

from clusters.models import Node
from core.db.distinct import distinct_values

from .choices import Verdict, WorkloadState
from .fragments import stranded_gpus
from .models import Allocation, Workload

RECENT_LIMIT = 10
"""Workloads a server, node or GPU page lists under "Recent workloads"."""

_ALLOCATION_ORDER = ("node_name", "index", "id")


def workload_rows() -> QuerySet[Workload]:
    """Workloads with their cluster, no allocations: the list page's and CSV's columns are
    the row's own (shape, models, locality), so one query a page."""
    return Workload.objects.select_related("cluster")


def workload_list() -> QuerySet[Workload]:
    """Workloads with their cluster and every allocation (the shown set is picked from
    them: `describe.shown_allocations`), two queries for any page."""
    return Workload.objects.select_related("cluster").prefetch_related(
        Prefetch("allocations", queryset=Allocation.objects.order_by(*_ALLOCATION_ORDER))
    )


def workload_detail() -> QuerySet[Workload]:
    """One workload for its page: allocations with their server and MIG device."""
    return Workload.objects.select_related("cluster").prefetch_related(
        Prefetch(
            "allocations",
            queryset=Allocation.objects.select_related("server", "mig_device", "gpu").order_by(
                *_ALLOCATION_ORDER
            ),
        )
    )


def allocation_exists(**lookups: Any) -> Exists:
    """A workload has an allocation matching `lookups` (a filter that never duplicates rows)."""
    return Exists(Allocation.objects.filter(workload=OuterRef("pk"), **lookups))


def gpu_models() -> list[str]:
    """The GPU models workloads ran on, for the list's dropdown (one query over the few
    distinct model lists, not over the workloads' rows)."""
    lists = distinct_values(Workload.objects.all(), "gpu_models")  # walks workload_gpu_models
    return sorted({m for models in lists if isinstance(models, list) for m in models if m})


def workload_users() -> list[str]:
    return list(
        Workload.objects.exclude(user="").order_by("user").values_list("user", flat=True).distinct()
    )


@dataclass(frozen=True)
class WorkloadCounts:
    """The overview's figures: running workloads, the GPUs they hold, the poorly placed, and
    the free GPUs stranded on partly used nodes."""

    running: int
    gpus_held: int
    poorly_placed: int
    stranded: int = 0


def workload_counts() -> WorkloadCounts:
    """Three queries: the running workloads (and how many are poorly placed), the GPUs
    held, the stranded GPUs (`gpus_stranded`)."""
    running = Workload.objects.filter(state=WorkloadState.RUNNING).aggregate(
        running=Count("id"), poorly=Count("id", filter=Q(verdict=Verdict.POORLY_PLACED))
    )
    held = Allocation.objects.filter(until__isnull=True).count()
    return WorkloadCounts(
        running=running["running"],
        gpus_held=held,
        poorly_placed=running["poorly"],
        stranded=sum(gpus_stranded().values()),
    )


def held_now(
    *, server_id: int | None = None, node_id: int | None = None, gpu_id: int | None = None
) -> dict[int, list[Allocation]]:
    """Who holds each GPU now: GPU id -> its open allocations (several for MIG devices or a
    shared GPU), each with its workload. One query."""
    lookups = {
        k: v
        for k, v in (("server_id", server_id), ("node_id", node_id), ("gpu_id", gpu_id))
        if v is not None
    }
    rows = (
        Allocation.objects.filter(until__isnull=True, gpu__isnull=False, **lookups)
        .select_related("workload", "mig_device")
        .order_by("gpu_id", "mig_device_id", "id")
    )
    out: dict[int, list[Allocation]] = defaultdict(list)
    for a in rows:
        assert a.gpu_id is not None
        out[a.gpu_id].append(a)
    return dict(out)


@dataclass
class RecentWorkload:
    """A workload that ended on this server, node or GPU: the GPUs it held there, when."""

    workload: Workload
    allocations: list[Allocation] = field(default_factory=list)
    until: datetime | None = None

    @property
    def indexes(self) -> list[int]:
        return sorted({a.index for a in self.allocations if a.index is not None})

    @property
    def hostnames(self) -> list[str]:
        return sorted({a.server.hostname for a in self.allocations if a.server is not None})


def recent_workloads(
    *,
    server_id: int | None = None,
    node_id: int | None = None,
    gpu_id: int | None = None,
    gpu_serial: str = "",
    limit: int = RECENT_LIMIT,
) -> list[RecentWorkload]:
    """The last `limit` workloads whose allocations here ended, the latest first; by serial
    for a GPU (it keeps its past workloads after it moved), else by GPU id. One query: at
    most `limit` × 8 allocation rows (a workload holds at most 8 GPUs of a server in the
    common case; one holding more shows fewer neighbours, never a wrong one)."""
    where = Q(until__isnull=False)
    if server_id is not None:
        where &= Q(server_id=server_id)
    if node_id is not None:
        where &= Q(node_id=node_id)
    if gpu_serial:
        where &= Q(gpu_serial=gpu_serial)
    elif gpu_id is not None:
        where &= Q(gpu_id=gpu_id)
    rows = (
        Allocation.objects.filter(where)
        .select_related("workload", "workload__cluster", "server")
        .order_by("-until", "-id")[: limit * 8]
    )
    return _group_recent(rows, limit)


def _group_recent(rows: Iterable[Allocation], limit: int) -> list[RecentWorkload]:
    recent: dict[int, RecentWorkload] = {}
    for a in rows:
        entry = recent.get(a.workload_id)
        if entry is None:
            if len(recent) >= limit:
                continue
            entry = recent[a.workload_id] = RecentWorkload(workload=a.workload, until=a.until)
        entry.allocations.append(a)
    return list(recent.values())


def gpus_stranded() -> dict[str, int]:
    """Free GPUs on partly used nodes per cluster (`workloads.fragments`), over the live,
    ready and schedulable nodes: held is the larger of the allocations recorded and the
    scheduler's own count (a source that gives counts only). One query."""
    held = Subquery(
        Allocation.objects.filter(node_id=OuterRef("pk"), until__isnull=True)
        .order_by()
        .values("node_id")
        .annotate(n=Count("id"))
        .values("n")[:1]
    )
    rows = (
        Node.objects.filter(gone_at__isnull=True, ready=True, schedulable=True)
        .annotate(held=held)
        .values_list("cluster__name", "gpu_capacity", "gpu_used", "held")
    )
    found: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for cluster, capacity, used, allocated in rows:
        found[cluster].append((capacity or 0, max(used or 0, allocated or 0)))
    return {cluster: stranded_gpus(nodes) for cluster, nodes in found.items()}
