"""Health findings written as `findings.Finding` rows: raised with the GPU and the action,
resolved when the condition clears, and never touching the scheduler layer's findings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.reconcile import reconcile_all
from findings.choices import Family, FindingType, Severity
from findings.models import Finding
from health.services import health_findings_sync, health_sweep
from health.tasks import record_health
from inventory.models import Gpu
from tests.reports import gpu_uuid

from .fleet import Agent, healthy, server_report, with_events, xid

pytestmark = pytest.mark.django_db

T0 = "2026-11-30T08:00:00Z"
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
BUS2 = "0000:38:00.0"  # make_report puts GPU i at 0x18 + 0x10 * i


def fatal_on_gpu2(hostname: str) -> dict:
    return with_events(
        server_report(hostname), xid(79, BUS2, T0, uuid=gpu_uuid(hostname, 2), message="<b>x</b>")
    )


def test_a_fatal_xid_raises_a_finding_with_its_gpu_and_action_and_resolves_after_the_window():
    Agent("dgx-01").send(fatal_on_gpu2("dgx-01"))
    health_sweep()
    assert health_findings_sync(now=NOW) == (1, 0, 1)
    finding = Finding.objects.get(type=FindingType.GPU_FATAL_XID)
    gpu = Gpu.objects.get(uuid=gpu_uuid("dgx-01", 2))
    assert finding.gpu_id == gpu.pk and finding.server_id == gpu.server_id
    assert finding.severity == Severity.CRITICAL and finding.resolved_at is None
    assert finding.action  # the step to take, not blank
    assert health_findings_sync(now=NOW + timedelta(minutes=5)) == (0, 0, 1)  # unchanged
    later = NOW + timedelta(days=2)
    assert health_findings_sync(now=later)[1] == 1
    finding.refresh_from_db()
    assert finding.resolved_at == later


def test_a_counter_finding_resolves_when_the_gpu_reports_healthy():
    agent = Agent("dgx-01")
    sick = server_report("dgx-01")
    sick["gpus"][3]["health"] = healthy(pcie_link_width_current=8)
    agent.send(sick)
    health_sweep()
    health_findings_sync(now=NOW)
    assert Finding.objects.filter(
        type=FindingType.GPU_PCIE_DEGRADED, resolved_at__isnull=True
    ).exists()
    agent.send(server_report("dgx-01"))
    health_sweep()
    health_findings_sync(now=NOW)
    assert not Finding.objects.filter(
        type__in=FindingType.of_family(Family.HEALTH), resolved_at__isnull=True
    ).exists()


def test_health_and_the_scheduler_layer_never_resolve_each_others_findings():
    Agent("dgx-01").send(fatal_on_gpu2("dgx-01"))
    health_sweep()
    health_findings_sync(now=NOW)
    scheduler = Finding.objects.create(
        type=FindingType.SERVER_WITHOUT_NODE,
        severity=Severity.WARNING,
        subject="server:test",
        message="in no scheduler",
    )
    reconcile_all(now=NOW)
    assert Finding.objects.get(type=FindingType.GPU_FATAL_XID).resolved_at is None
    health_findings_sync(now=NOW + timedelta(days=2))
    scheduler.refresh_from_db()
    assert scheduler.type == FindingType.SERVER_WITHOUT_NODE
    # resolved or not, only by reconcile: the health pass left it as reconcile did
    assert Finding.objects.get(type=FindingType.GPU_FATAL_XID).resolved_at is not None


def test_the_sweep_task_raises_findings_after_recording():
    recent = (timezone.now() - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    uuid = gpu_uuid("dgx-01", 2)
    Agent("dgx-01").send(with_events(server_report("dgx-01"), xid(79, BUS2, recent, uuid=uuid)))
    assert record_health() == 1
    assert Finding.objects.get(type=FindingType.GPU_FATAL_XID).gpu.uuid == uuid


def _sync_queries(n: int, first: int = 0) -> int:
    for i in range(first, first + n):
        Agent(f"dgx-{i:02}").send(fatal_on_gpu2(f"dgx-{i:02}"))
    health_sweep()
    with CaptureQueriesContext(connection) as ctx:
        health_findings_sync(now=NOW)
    return len(ctx)


def test_the_sync_costs_the_same_queries_for_1_or_7_servers():
    small = _sync_queries(1)
    assert _sync_queries(6, first=1) == small
    assert Finding.objects.filter(type=FindingType.GPU_FATAL_XID).count() == 7
