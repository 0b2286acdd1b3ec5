"""The Prometheus collector: inventory and backend figures read at scrape time.

A custom collector yielding metric families, not process-global gauges: with several
gunicorn workers each scrape lands on one of them, and only numbers read from the database
agree whichever it is. The scrape costs a fixed number of queries (selectors.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from celery import current_app
from django.utils import timezone
from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from . import selectors
from .selectors import Histogram

logger = logging.getLogger(__name__)


def _histogram_family(name: str, documentation: str, histogram: Histogram) -> Metric:
    buckets = [(_le(bound), count) for bound, count in histogram.buckets]
    buckets.append(("+Inf", histogram.count))
    return HistogramMetricFamily(
        name, documentation, buckets=buckets, sum_value=round(histogram.total, 6)
    )


def _le(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def celery_queue_depth() -> int | None:
    """Messages waiting in the default Celery queue (Redis `LLEN`); None without a Redis broker.

    In the embedded mode (tasks in-process) nothing queues, so there is no figure.
    """
    # The project's app (config/ makes it the current one); a reader never imports config/.
    conf = current_app.conf
    url = conf.broker_url or ""
    if conf.task_always_eager or not url.startswith(("redis://", "rediss://", "unix://")):
        return None
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    try:
        return int(client.llen(conf.task_default_queue or "celery"))
    finally:
        client.close()


class AtlasCollector(Collector):
    """Every `atlas_*` family. Families are documented in docs/deploy.md (Metrics)."""

    def collect(self) -> Iterator[Metric]:
        now = timezone.now()

        servers = GaugeMetricFamily(
            "atlas_servers", "Servers by state (online, stale, offline, never).", labels=["state"]
        )
        for state, n in sorted(selectors.servers_by_state(now).items()):
            servers.add_metric([state], n)
        yield servers

        gpus = GaugeMetricFamily(
            "atlas_gpus",
            "GPUs by model and health (healthy, or the most serious problem: lost, ...).",
            labels=["model", "health"],
        )
        for (model, health), n in sorted(selectors.gpus_by_model_and_health().items()):
            gpus.add_metric([model, health], n)
        yield gpus

        mig = GaugeMetricFamily("atlas_mig_devices", "MIG devices by profile.", labels=["profile"])
        for profile, n in sorted(selectors.mig_devices_by_profile().items()):
            mig.add_metric([profile], n)
        yield mig

        nodes = GaugeMetricFamily(
            "atlas_nodes",
            "Scheduler nodes (gone ones left out) by cluster, kind and binding to a server.",
            labels=["cluster", "kind", "bound"],
        )
        for (cluster, kind, bound), n in sorted(selectors.nodes_by_cluster().items()):
            nodes.add_metric([cluster, kind, "true" if bound else "false"], n)
        yield nodes

        findings = GaugeMetricFamily(
            "atlas_findings_open",
            "Open findings by type and severity.",
            labels=["type", "severity"],
        )
        for (type_, severity), n in sorted(selectors.open_findings_by_type().items()):
            findings.add_metric([type_, severity], n)
        yield findings

        yield _histogram_family(
            "atlas_server_report_age_seconds",
            "Seconds since each server's last report, over the fleet now (servers that never "
            "reported left out). A distribution at scrape time: use histogram_quantile or "
            "the buckets, not rate().",
            selectors.server_report_age(now),
        )
        yield _histogram_family(
            "atlas_report_apply_latency_seconds",
            "Received-to-applied seconds of the reports applied in the last "
            "ATLAS_METRICS_WINDOW_S seconds.",
            selectors.report_apply_latency(now),
        )

        received = CounterMetricFamily(
            "atlas_reports_received",
            "Agent reports by the answer they got: pending (stored, to apply), unchanged "
            "(heartbeat), applied, rejected (with its HTTP status). Counted while metrics are on.",
            labels=["outcome", "code"],
        )
        for outcome, code, n in sorted(selectors.report_outcomes()):
            received.add_metric([outcome, str(code)], n)
        yield received

        stored = GaugeMetricFamily(
            "atlas_reports",
            "Stored reports by status (retention keeps a few per server).",
            labels=["status"],
        )
        by_status = selectors.reports_by_status()
        for status, (n, _oldest) in sorted(by_status.items()):
            stored.add_metric([status], n)
        yield stored
        pending, oldest = by_status.get("pending", (0, None))
        yield GaugeMetricFamily(
            "atlas_reports_pending", "Reports stored and not applied yet.", value=pending
        )
        yield GaugeMetricFamily(
            "atlas_reports_pending_oldest_age_seconds",
            "Age of the oldest pending report (0 when none waits).",
            value=max((now - oldest).total_seconds(), 0.0) if oldest else 0.0,
        )

        syncs = GaugeMetricFamily(
            "atlas_cluster_last_success_timestamp_seconds",
            "When each cluster's node set was last synced or a snapshot of it applied "
            "(Unix time; absent for a cluster never synced).",
            labels=["cluster", "kind"],
        )
        for name, kind, at in selectors.cluster_syncs():
            if at is not None:
                syncs.add_metric([name, kind], at.timestamp())
        yield syncs

        deliveries = GaugeMetricFamily(
            "atlas_webhook_deliveries", "Webhook deliveries by status.", labels=["status"]
        )
        for status, n in sorted(selectors.deliveries_by_status().items()):
            deliveries.add_metric([status], n)
        yield deliveries

        yield from self._workloads()
        yield from self._queue()

    def _workloads(self) -> Iterator[Metric]:
        running = GaugeMetricFamily(
            "atlas_workloads_running",
            "Running workloads (Slurm jobs, pod groups) by cluster and kind.",
            labels=["cluster", "kind"],
        )
        for (cluster, kind), n in sorted(selectors.workloads_running().items()):
            running.add_metric([cluster, kind], n)
        yield running
        held = GaugeMetricFamily(
            "atlas_gpus_held",
            "GPUs and MIG devices held by running workloads, by cluster and account (the "
            "Slurm user, the pods' namespace; past 200 accounts the rest as 'other').",
            labels=["cluster", "account"],
        )
        for (cluster, account), n in sorted(selectors.gpus_held().items()):
            held.add_metric([cluster, account], n)
        yield held
        stranded = GaugeMetricFamily(
            "atlas_gpus_stranded",
            "Free GPUs on partly used nodes (some held, some free): they cannot take a "
            "whole-node job.",
            labels=["cluster"],
        )
        for cluster, n in sorted(selectors.gpus_stranded().items()):
            stranded.add_metric([cluster], n)
        yield stranded

    def _queue(self) -> Iterator[Metric]:
        try:
            depth = celery_queue_depth()
        except Exception as exc:  # the scrape still answers; the broker's absence is a figure
            logger.warning("metrics: Celery queue depth unavailable: %s", type(exc).__name__)
            yield GaugeMetricFamily("atlas_broker_up", "1 when the broker answered.", value=0)
            return
        if depth is None:
            return
        yield GaugeMetricFamily("atlas_broker_up", "1 when the broker answered.", value=1)
        yield GaugeMetricFamily(
            "atlas_celery_queue_length", "Tasks waiting in the Celery queue.", value=depth
        )


registry = CollectorRegistry(auto_describe=False)
registry.register(AtlasCollector())
