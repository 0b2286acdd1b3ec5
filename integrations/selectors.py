"""Reads behind /metrics (each figure one aggregate query, whatever the fleet's size), and
the workloads that alerts and webhook bodies name.

Everything is computed from the database at scrape time, so every gunicorn worker (and every
host) answers the same numbers; nothing is counted in a process.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import (
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)

from clusters.models import Cluster, Node
from findings.models import Finding
from inventory.choices import ReportStatus
from inventory.health import gpu_problem_code, problem_of_code
from inventory.models import Gpu, MigDevice, Report, Server
from inventory.selectors import server_state_expression
from workloads.choices import WorkloadKind, WorkloadState
from workloads.fragments import stranded_gpus
from workloads.models import Allocation, Workload
from workloads.services.holders import gpu_holders_at

from .choices import DeliveryStatus
from .models import Delivery, ReportOutcomeCount, Webhook

REPORT_AGE_BUCKETS_S = (30, 60, 120, 300, 600, 1800, 3600, 6 * 3600, 24 * 3600, 7 * 24 * 3600)
"""Upper bounds of `atlas_server_report_age_seconds`; the stale/offline thresholds fall inside."""

APPLY_LATENCY_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)
"""Upper bounds of `atlas_report_apply_latency_seconds` (received to applied)."""

HEALTHY = "healthy"


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative bucket counts (upper bound, count), the +Inf count and the sum of values."""

    buckets: list[tuple[float, int]]
    count: int
    total: float


def servers_by_state(now: datetime) -> dict[str, int]:
    rows = (
        Server.objects.annotate(state_value=server_state_expression(now))
        .order_by()
        .values_list("state_value")
        .annotate(n=Count("id"))
    )
    return dict(rows)


def gpus_by_model_and_health() -> dict[tuple[str, str], int]:
    """GPU counts by model and health: `healthy` or the most serious problem (`lost`, ...)."""
    rows = (
        Gpu.objects.annotate(problem=gpu_problem_code())
        .order_by()
        .values_list("name", "problem")
        .annotate(n=Count("id"))
    )
    return {(name, problem_of_code(code) or HEALTHY): n for name, code, n in rows}


def mig_devices_by_profile() -> dict[str, int]:
    return dict(MigDevice.objects.order_by().values_list("profile").annotate(n=Count("id")))


def nodes_by_cluster(*, include_gone: bool = False) -> dict[tuple[str, str, bool], int]:
    """Scheduler nodes (gone ones left out) by cluster, kind and whether bound to a server."""
    nodes = Node.objects.all() if include_gone else Node.objects.filter(gone_at__isnull=True)
    rows = (
        nodes.order_by()
        .values_list("cluster__name", "kind")
        .annotate(n=Count("id"), bound=Count("id", filter=Q(server__isnull=False)))
    )
    counts: dict[tuple[str, str, bool], int] = {}
    for cluster, kind, n, bound in rows:
        counts[(cluster, kind, True)] = bound
        counts[(cluster, kind, False)] = n - bound
    return counts


def open_findings_by_type() -> dict[tuple[str, str], int]:
    rows = (
        Finding.objects.filter(resolved_at__isnull=True)
        .order_by()
        .values_list("type", "severity")
        .annotate(n=Count("id"))
    )
    return {(type_, severity): n for type_, severity, n in rows}


def _duration_histogram(queryset, duration, bounds: tuple[float, ...]) -> Histogram:
    """Cumulative bucket counts and the sum of `duration` (a DurationField expression) over
    the queryset's rows, in one aggregate query."""
    counts = {
        f"le_{i}": Count("id", filter=Q(duration_s__lte=timedelta(seconds=bound)))
        for i, bound in enumerate(bounds)
    }
    row = queryset.annotate(duration_s=duration).aggregate(
        n=Count("id"), total=Sum("duration_s"), **counts
    )
    total = row["total"]  # a timedelta; plain microseconds where a backend does not convert
    return Histogram(
        buckets=[(float(bound), row[f"le_{i}"]) for i, bound in enumerate(bounds)],
        count=row["n"],
        total=total.total_seconds() if isinstance(total, timedelta) else float(total or 0) / 1e6,
    )


def server_report_age(now: datetime) -> Histogram:
    """Seconds since each server's last report (servers that never reported left out)."""
    return _duration_histogram(
        Server.objects.filter(last_seen__isnull=False, last_seen__lte=now),
        ExpressionWrapper(Value(now) - F("last_seen"), output_field=DurationField()),
        REPORT_AGE_BUCKETS_S,
    )


def report_apply_latency(now: datetime) -> Histogram:
    """Received-to-applied seconds of the reports applied in the last ATLAS_METRICS_WINDOW_S.

    A window over stored rows, not a process's counter: the figure is the same from every
    worker, and old reports pruned by retention do not make it jump.
    """
    window_start = now - timedelta(seconds=settings.ATLAS_METRICS_WINDOW_S)
    return _duration_histogram(
        Report.objects.filter(status=ReportStatus.APPLIED, applied_at__gte=window_start),
        ExpressionWrapper(F("applied_at") - F("received_at"), output_field=DurationField()),
        APPLY_LATENCY_BUCKETS_S,
    )


def reports_by_status() -> dict[str, tuple[int, datetime | None]]:
    """Stored reports by status, with the oldest one's received time (retention keeps a few
    per server, so this is a gauge of what waits, not a count of what came)."""
    rows = (
        Report.objects.order_by()
        .values_list("status")
        .annotate(n=Count("id"), oldest=Min("received_at"))
    )
    return {status: (n, oldest) for status, n, oldest in rows}


def report_outcomes() -> list[tuple[str, int, int]]:
    """(outcome, HTTP status, count) of every answer the reports endpoint gave."""
    return list(ReportOutcomeCount.objects.values_list("outcome", "status_code", "count"))


def cluster_syncs() -> list[tuple[str, str, datetime | None]]:
    """(cluster, kind, last successful sync or applied snapshot) per cluster."""
    return list(Cluster.objects.order_by("name").values_list("name", "kind", "last_success_at"))


def deliveries_by_status() -> dict[str, int]:
    return dict(Delivery.objects.order_by().values_list("status").annotate(n=Count("id")))


def webhook_list() -> QuerySet[Webhook]:
    """Every webhook with its last delivery (status, when, answer) and its deliveries per
    status: one query, whatever the number of webhooks and deliveries."""
    last = Delivery.objects.filter(webhook=OuterRef("pk")).order_by("-id")
    mine = Q(deliveries__status=DeliveryStatus.PENDING)
    return Webhook.objects.order_by("id").annotate(
        last_status=Subquery(last.values("status")[:1]),
        last_at=Subquery(last.values("created_at")[:1]),
        last_response=Subquery(last.values("response_status")[:1]),
        pending=Count("deliveries", filter=mine),
        failed=Count("deliveries", filter=Q(deliveries__status=DeliveryStatus.FAILED)),
    )


def webhook_deliveries(*, webhook: Webhook) -> QuerySet[Delivery]:
    """A webhook's deliveries, newest first, without their bodies."""
    return Delivery.objects.filter(webhook=webhook).order_by("-id").defer("payload")


def finding_holders(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any] | None]:
    """The workload that held each finding's GPU when it was raised (None for a finding
    about no GPU, or a GPU no workload held): one query for all the rows, none without a
    GPU finding."""
    return gpu_holders_at(
        [(r.get("gpu_id"), r.get("gpu__serial") or "", r["first_seen"]) for r in rows]
    )


# -- workloads ----------------------------------------------------------------------------

ACCOUNT_SERIES_MAX = 200
"""`atlas_gpus_held` keeps the accounts holding the most GPUs as their own series, the rest
summed per cluster as `other`: a scrape's size stays bounded whatever the user count."""

OTHER = "other"


def workloads_running() -> dict[tuple[str, str], int]:
    """Running workloads by (cluster, kind): one aggregate query."""
    rows = (
        Workload.objects.filter(state=WorkloadState.RUNNING)
        .order_by()
        .values_list("cluster__name", "kind")
        .annotate(n=Count("id"))
    )
    return {(cluster, kind): n for cluster, kind, n in rows}


def gpus_held(limit: int = ACCOUNT_SERIES_MAX) -> dict[tuple[str, str], int]:
    """GPUs (and MIG devices) held now by (cluster, account), the account being the Slurm
    job's user or the pods' namespace; past `limit` accounts the smallest are summed as
    `other` (`capped`). One aggregate query."""
    rows = (
        Allocation.objects.filter(until__isnull=True)
        .order_by()
        .values_list(
            "workload__cluster__name", "workload__kind", "workload__user", "workload__account"
        )
        .annotate(n=Count("id"))
    )
    held: dict[tuple[str, str], int] = defaultdict(int)
    for cluster, kind, user, account, n in rows:
        who = account if kind == WorkloadKind.PODS else user
        held[(cluster, who or "")] += n
    return capped(held, limit)


def capped(counts: Mapping[tuple[str, str], int], limit: int) -> dict[tuple[str, str], int]:
    """The `limit` largest series as they are, the rest summed per cluster as `other`."""
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    kept: dict[tuple[str, str], int] = dict(ranked[:limit])
    for (cluster, _who), n in ranked[limit:]:
        kept[(cluster, OTHER)] = kept.get((cluster, OTHER), 0) + n
    return kept


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
