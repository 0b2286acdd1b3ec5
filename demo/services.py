"""The demo service: the declared demo fleet (`simulator.demo`) loaded through the real API.

`demo_load` serves the app on a private port for a moment and talks to it over HTTP as
agents and cron jobs would: the agent's own transport posts every report, and the
Kubernetes and Slurm snapshots are posted as `kubectl` and `scontrol` print them. The fleet
is declared before it is reconciled: the expected hardware first, then every report, then
both clusters' snapshots with reconciliation held, then one reconcile. Reconciling the
Kubernetes snapshot before the Slurm one arrived would raise, then resolve, "server in no
scheduler" for every Slurm-only server: findings that were never true. The InfiniBand fabric
is imported through the fabric service once the reports are in, so every adapter binds to
its server by the GUIDs the agent reported. The reports carry a week of kernel-log health
events (`simulator.demo.DEMO_HEALTH_WEEK`); the one episode that has since resolved is judged
at its time (`health_findings_replay`), the rest now.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.contrib.auth import get_user_model
from django.core.wsgi import get_wsgi_application
from django.db import connections, transaction
from django.utils import timezone

from clusters.models import ReconcileState
from clusters.reconcile import ReconcileResult, reconcile_all
from fabric.services import SnapshotResult, ethernet_fabric_sync, fabric_snapshot_ingest
from health.services import health_findings_replay, health_findings_sync, health_sweep
from inventory.choices import ReportStatus
from inventory.models import AgentToken, HardwareProfile, Report, Server, UserToken
from inventory.services import agent_token_create, user_token_create
from placement.summaries import placement_summaries_refresh
from placement.workload_verdicts import judge_workloads as workload_judge
from simulator.demo import (
    DEMO_FABRIC,
    DEMO_RESOLVED_AT,
    demo_anchor,
    demo_fabric,
    demo_machines,
    demo_report,
    demo_snapshots,
)
from simulator.fleet import PushResult, push_reports
from simulator.keepalive import Plan, post_snapshot
from workloads.services.apply import allocations_join
from workloads.services.findings import workload_findings_refresh
from workloads.services.holders import event_holders_name

DEMO_USER = "admin"
# What people declare and agents cannot know: the hardware a DGX H100 should have.
DEMO_HARDWARE_PROFILES = {
    "DGX H100": {
        "vendor": "NVIDIA",
        "product": "DGXH100",
        "expected_gpu_count": 8,
        "expected_gpu_model": "H100",
    },
}


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def local_server() -> Iterator[str]:
    """This app on 127.0.0.1 and a free port, in a thread, for the duration of the block."""
    server: WSGIServer = make_server(
        "127.0.0.1", 0, get_wsgi_application(), handler_class=_QuietHandler
    )

    def serve() -> None:
        try:
            server.serve_forever()
        finally:
            connections.close_all()  # this thread's: a test database can then be dropped

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(5)


@contextmanager
def reconcile_held() -> Iterator[None]:
    """Inside the block, what is posted asks for no reconcile of its own: a reconcile is
    marked as already requested (the one the caller runs after the block), so a snapshot's
    request finds it waiting. The mark is cleared on the way out, whatever happens."""
    ReconcileState.objects.update_or_create(id=1, defaults={"requested_at": timezone.now()})
    try:
        yield
    finally:
        ReconcileState.objects.filter(id=1).update(requested_at=None)


@dataclass
class DemoLoad:
    """What `demo_load` did, and the plan that keeps this fleet reporting."""

    reports: list[PushResult]
    snapshots: list[dict[str, Any]]
    reconciled: ReconcileResult
    plan: Plan = field(repr=False)
    admin_created: bool = False
    fabric: SnapshotResult | None = None

    @property
    def sent(self) -> int:
        return sum(1 for r in self.reports if r.outcome == "sent")


def _admin() -> tuple[Any, bool]:
    User = get_user_model()
    user = User.objects.filter(username=DEMO_USER).first()
    if user is not None:
        return user, False
    password = os.environ.get("ATLAS_DEMO_PASSWORD", "admin")
    return User.objects.create_superuser(DEMO_USER, "admin@example.invalid", password), True


def _wait_applied(report_ids: list[int], *, timeout_s: float = 120.0) -> None:
    """With a broker, workers apply the reports after the answer: the fleet is declared
    only once they are in (in-process tasks have applied them already)."""
    deadline = time.monotonic() + timeout_s
    pending = Report.objects.filter(id__in=report_ids, status=ReportStatus.PENDING)
    while pending.exists() and time.monotonic() < deadline:
        time.sleep(0.2)


def _pods(snapshot: Any) -> bool:
    return '"kind": "Pod"' in snapshot.body[:4096]


def demo_load(*, seed: int | str = "0") -> DemoLoad:
    """Load the declared demo fleet through the real API; safe to run again (the same seed
    gives the same servers, updated in place). Creates the user admin when absent."""
    with transaction.atomic():
        user, admin_created = _admin()
        for name, expected in DEMO_HARDWARE_PROFILES.items():
            HardwareProfile.objects.update_or_create(name=name, defaults=expected)
        # Demo tokens are re-issued on every run: a key is never stored in clear text.
        AgentToken.objects.filter(name__startswith="demo:").delete()
        UserToken.objects.filter(user=user, name="demo").delete()
        _api_token, api_key = user_token_create(user=user, name="demo")
    machines = demo_machines(seed)
    anchor = demo_anchor(timezone.now())
    reports = [demo_report(machine, anchor) for _, machine in machines]
    keys = [agent_token_create(name=f"demo:{r['host']['hostname']}")[1] for r in reports]
    snapshots = demo_snapshots({r["host"]["hostname"]: r for r in reports})

    with local_server() as url:
        results = push_reports(url, keys, reports, concurrency=4)
        _wait_applied([r.answer["id"] for r in results if r.answer and r.answer.get("id")])
        for declared, _ in machines:
            if declared.rack:
                Server.objects.filter(hostname=declared.hostname).update(
                    rack=declared.rack, rack_position=declared.rack_position
                )
        # After the reports: adapters bind by the GUIDs the servers' agents reported.
        by_host = {r["host"]["hostname"]: r for r in reports}
        fabric = fabric_snapshot_ingest(fabric_name=DEMO_FABRIC, raw=demo_fabric(by_host))
        ethernet_fabric_sync(force=True)  # the L40S servers' RoCE leaves, heard over LLDP
        with reconcile_held():
            answers = [post_snapshot(url, snapshot, api_key, timeout=60) for snapshot in snapshots]
            reconciled = reconcile_all()
            # The jobs and pods were posted before the reconcile bound their nodes: their
            # GPUs join now (the reconcile's follow-up in production), the pods' through the
            # devices the kubelet named (the next pull in production).
            allocations_join()
            for pods in (s for s in snapshots if _pods(s)):
                post_snapshot(url, pods, api_key, timeout=60)
    workload_findings_refresh()
    workload_judge(force=True)
    event_holders_name(since=anchor - timedelta(days=8))  # the week's events, as they happened
    # The week of health the reports' events tell, judged as it happened: the episode that
    # has since resolved was raised at its time, then today's findings are judged.
    health_sweep()
    health_findings_replay(at=anchor - DEMO_RESOLVED_AT)
    health_findings_sync()
    placement_summaries_refresh()  # what beat does in production; `make run` has no beat
    # An agent sends its kernel-log events once: the beats that keep the fleet alive carry none.
    beats = [{k: v for k, v in r.items() if k != "events"} for r in reports]
    plan = Plan(agent_tokens=keys, reports=beats, api_token=api_key, snapshots=snapshots)
    return DemoLoad(results, answers, reconciled, plan, admin_created, fabric)
