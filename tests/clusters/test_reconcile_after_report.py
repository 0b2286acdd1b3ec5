"""What follows an applied report (wired in `config/celery.py`): the server's findings at
once, the full reconcile requested, the health record; the same in-process and with a
broker (issue 11 §5, issue 22)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from clusters import tasks as cluster_tasks
from clusters.models import ReconcileState
from config.celery import app as celery_app
from findings.choices import FindingType
from findings.models import Finding
from health import tasks as health_tasks
from inventory.choices import GpuStatus, ReportStatus
from inventory.models import Gpu, Report
from inventory.services import report_receive
from inventory.services.tokens import agent_token_create
from inventory.tasks import apply_report, sweep_pending_reports
from tests.clusters.test_reconcile_servers import fleet, open_findings
from tests.reports import make_report
from workloads import tasks as workload_tasks

pytestmark = pytest.mark.django_db


def post(server, report) -> int:
    token = server.agent_tokens.get()
    return report_receive(token=token, body=json.dumps(report).encode()).report_id


def apply(report_id: int) -> str:
    """As the worker runs it: through Celery's tracer (here, in-process)."""
    return apply_report.apply((report_id,)).get()["status"]


def a_full_pass_waits() -> None:
    """A full reconcile is already queued (with a broker it runs later, on a worker)."""
    ReconcileState.objects.update_or_create(id=1, defaults={"requested_at": timezone.now()})


def test_a_lost_gpu_is_a_finding_as_soon_as_the_report_is_applied():
    servers = fleet("dgx-01", "dgx-02")
    # Something only the full pass would judge: dgx-02's GPU goes bad without a report.
    Gpu.objects.filter(server=servers["dgx-02"], index=0).update(status=GpuStatus.ERROR)
    a_full_pass_waits()

    assert apply(post(servers["dgx-01"], make_report("dgx-01", skip_gpus=(3,)))) == "applied"

    assert [(t, h) for t, h, _ in open_findings()] == [
        (FindingType.GPU_COUNT_MISMATCH, "dgx-01"),
        (FindingType.UNHEALTHY_GPU, "dgx-01"),
    ]


def test_the_full_pass_follows_the_report_in_process():
    servers = fleet("dgx-01", "dgx-02")
    Gpu.objects.filter(server=servers["dgx-02"], index=0).update(status=GpuStatus.ERROR)

    apply(post(servers["dgx-01"], make_report("dgx-01", skip_gpus=(3,))))

    assert (FindingType.UNHEALTHY_GPU, "dgx-02") in [(t, h) for t, h, _ in open_findings()]
    assert ReconcileState.objects.get().requested_at is None  # it ran, and cleared the flag


def test_the_gpu_coming_back_resolves_it_with_the_next_report():
    servers = fleet("dgx-01")
    apply(post(servers["dgx-01"], make_report("dgx-01", skip_gpus=(3,))))
    assert open_findings()
    # A new body (the very same bytes as the first report would be that report again).
    apply(post(servers["dgx-01"], make_report("dgx-01", driver="550.54.16")))
    assert open_findings() == []
    assert Finding.objects.filter(resolved_at__isnull=False).count() == 2


def test_a_new_server_asks_for_the_full_pass_which_binds_and_judges_it():
    fleet("dgx-01")
    ReconcileState.objects.update_or_create(id=1, defaults={"requested_at": None})
    token, _ = agent_token_create(name="spare-01")
    body = json.dumps(make_report("spare-01")).encode()
    apply(report_receive(token=token, body=body).report_id)
    # In-process tasks: the requested full pass ran and judged the new server.
    assert (FindingType.SERVER_WITHOUT_NODE, "spare-01") in [(t, h) for t, h, _ in open_findings()]


def test_a_failing_follow_up_never_fails_the_report(monkeypatch):
    servers = fleet("dgx-01")

    def broken(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(cluster_tasks, "reconcile_servers", broken)
    report_id = post(servers["dgx-01"], make_report("dgx-01", skip_gpus=(1,)))
    assert apply(report_id) == ReportStatus.APPLIED
    assert Report.objects.get(pk=report_id).status == ReportStatus.APPLIED


def test_reports_applied_by_the_sweep_are_followed_too(settings):
    servers = fleet("dgx-01")
    a_full_pass_waits()
    settings.ATLAS_PENDING_REPORT_GRACE_S = 0
    post(servers["dgx-01"], make_report("dgx-01", skip_gpus=(3,)))  # never enqueued
    assert sweep_pending_reports() == 1
    assert (FindingType.GPU_COUNT_MISMATCH, "dgx-01") in [(t, h) for t, h, _ in open_findings()]


def followed(monkeypatch, *, eager: bool, report) -> list[tuple[str, tuple, dict]]:
    """The tasks sent after one applied report, in one mode (each recorded, none run)."""
    sent: list[tuple[str, tuple, dict]] = []
    tasks = (
        cluster_tasks.reconcile_server,
        health_tasks.record_health,
        workload_tasks.record_workload_facts,
    )
    for task in tasks:
        monkeypatch.setattr(
            task,
            "apply_async",
            lambda args=(), kwargs=None, name=task.name, **_: sent.append(
                (name, tuple(args or ()), dict(kwargs or {}))
            ),
        )
    celery_app.conf.task_always_eager = eager  # restored by the autouse fixture
    apply(report())
    return sent


def test_the_same_follow_ups_run_in_process_and_with_a_broker(monkeypatch):
    from django.core.cache import cache

    servers = fleet("dgx-01")
    cache.clear()  # the broker mode's window for record_health

    def report():
        return post(servers["dgx-01"], make_report("dgx-01", driver=f"550.{len(calls)}"))

    calls: list[list] = []
    calls.append(followed(monkeypatch, eager=True, report=report))
    calls.append(followed(monkeypatch, eager=False, report=report))
    expected = [
        ("clusters.tasks.reconcile_server", (servers["dgx-01"].pk,), {"identity_changed": False}),
        ("health.tasks.record_health", (), {}),
        ("workloads.tasks.record_workload_facts", (), {}),
    ]
    assert calls == [expected, expected]


def test_a_superseded_report_is_recorded_for_health_but_not_reconciled(monkeypatch):
    servers = fleet("dgx-01")
    older = post(servers["dgx-01"], make_report("dgx-01", driver="550.1"))
    apply(post(servers["dgx-01"], make_report("dgx-01", driver="550.2")))
    sent = followed(monkeypatch, eager=True, report=lambda: older)
    assert sent == [("health.tasks.record_health", (), {})]
    assert Report.objects.get(pk=older).status == ReportStatus.SUPERSEDED


def test_with_a_broker_a_burst_queues_one_health_record_per_window(monkeypatch):
    from django.core.cache import cache

    from core.tasks import enqueue_soon

    cache.clear()
    sent = []
    monkeypatch.setattr(health_tasks.record_health, "apply_async", lambda *a, **k: sent.append(1))
    celery_app.conf.task_always_eager = False  # restored by the autouse fixture
    assert [enqueue_soon(health_tasks.record_health, window_s=60) for _ in range(3)] == [
        True,
        False,
        False,
    ]
    assert sent == [1]


def test_a_stale_reconcile_request_is_sent_again():
    ReconcileState.objects.update_or_create(
        id=1, defaults={"requested_at": timezone.now() - timedelta(hours=1)}
    )
    assert cluster_tasks.reconcile_soon() is True
