"""The workloads findings pass over stored facts: each type raised while its cause lasts and
resolved when it goes, written as the workloads family, in a fixed number of queries."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent.schema import load_schema
from findings.choices import Family, FindingType, Severity
from findings.models import Finding
from inventory.choices import GpuStatus
from inventory.models import Gpu
from tests.reports import gpu_uuid
from tests.workloads.gpu_facts import (
    pod,
    pod_group,
    pods_view,
    proc,
    report,
    servers,
    slurm,
    slurm_job,
)
from workloads.models import GpuProcess
from workloads.services.facts import workload_facts_record
from workloads.services.findings import workload_findings_refresh
from workloads.tasks import record_workload_facts

pytestmark = pytest.mark.django_db

REPORTS_PROCESSES = "processes" in load_schema()["$defs"]["gpu"]["properties"]


def open_findings() -> list[tuple[str, str]]:
    return sorted(Finding.objects.filter(resolved_at__isnull=True).values_list("type", "severity"))


def judge() -> None:
    workload_facts_record()
    workload_findings_refresh()


def test_a_job_using_a_gpu_it_was_not_given_and_the_cure():
    s = servers("dgx-07")["dgx-07"]
    job = slurm_job("5679", {s: [0, 1]}, user="alice")
    report(s, {0: [proc(100, workload=slurm("5679"))], 6: [proc(101, workload=slurm("5679"))]})
    judge()
    assert open_findings() == [(FindingType.PROCESS_OUTSIDE_ALLOCATION, Severity.WARNING)]
    finding = Finding.objects.get()
    assert finding.server == s and finding.gpu == Gpu.objects.get(server=s, index=6)
    assert finding.details["pids"] == [101] and finding.details["workload"] == job.pk
    assert finding.details["user"] == "alice" and finding.details["gpu_index"] == 6

    report(s, {0: [proc(100, workload=slurm("5679"))]})
    judge()
    assert open_findings() == []
    assert Finding.objects.get().resolved_at is not None


def test_a_stray_process_with_no_workload_warns_and_resolves_once_gone():
    s = servers("dgx-07")["dgx-07"]
    report(s, {3: [proc(4242, memory_mib=30000, name="python3")]})
    record_workload_facts.apply()
    assert open_findings() == [(FindingType.STRAY_GPU_PROCESS, Severity.WARNING)]
    finding = Finding.objects.get()
    assert finding.details["pids"] == [4242]
    assert finding.details["used_memory_bytes"] == 30000 * 2**20
    assert finding.details["hostname"] == "dgx-07" and finding.details["gpu_index"] == 3
    assert "30000 MiB" in finding.message

    report(s, {})
    record_workload_facts.apply()
    assert open_findings() == []


def test_a_job_listed_after_the_report_joins_its_processes_on_the_next_pass():
    s = servers("dgx-07")["dgx-07"]
    slurm_job("1", {s: [7]})  # the cluster's jobs are listed
    report(s, {0: [proc(100, workload=slurm("5679"))]})
    judge()
    assert open_findings() == [(FindingType.STRAY_GPU_PROCESS, Severity.WARNING)]
    job = slurm_job("5679", {s: [0]})  # the jobs snapshot that names it, applied later
    workload_findings_refresh()  # what the apply service calls
    assert GpuProcess.objects.get().workload == job
    assert open_findings() == []


def test_an_ended_jobs_process_on_a_gpu_given_to_another_job_is_critical():
    s = servers("dgx-07")["dgx-07"]
    slurm_job("100", {s: [2]}, state="completed")
    slurm_job("200", {s: [2]}, user="bob")
    report(s, {2: [proc(1, workload=slurm("100")), proc(2, workload=slurm("200"))]})
    judge()
    assert open_findings() == [(FindingType.STRAY_GPU_PROCESS, Severity.CRITICAL)]
    assert Finding.objects.get().details["allocated_to"][0]["user"] == "bob"


def test_a_pod_process_on_a_server_without_the_kubelets_view_is_no_stray():
    s = servers("gpu-k01")["gpu-k01"]
    report(s, {0: [proc(1, workload=pod("uid-a"))]})
    judge()
    assert open_findings() == []


def test_a_pod_process_no_pod_holds_is_a_stray_where_the_pods_are_listed():
    s = servers("gpu-k01")["gpu-k01"]
    view = pods_view(("ml", "trainer-0", "main", [gpu_uuid("gpu-k01", 0)]))
    report(s, {4: [proc(1, workload=pod("uid-x"))]}, pod_resources=view)
    judge()
    assert open_findings() == []  # the cluster's pods are not listed: nobody can tell
    pod_group("ml/trainer", s, {"trainer-0": [0]})
    judge()
    assert open_findings() == [(FindingType.STRAY_GPU_PROCESS, Severity.WARNING)]
    assert Finding.objects.get().details["pod_uids"] == ["uid-x"]


def test_a_job_on_a_gpu_that_needs_action_until_it_is_fixed():
    s = servers("dgx-07")["dgx-07"]
    slurm_job("5679", {s: [0, 1]})
    Gpu.objects.filter(server=s, index=1).update(status=GpuStatus.ERROR)
    workload_findings_refresh()
    assert open_findings() == [(FindingType.WORKLOAD_ON_GPU_NEEDING_ACTION, Severity.WARNING)]
    assert Finding.objects.get().details["reason"] == "nvml_error"

    Gpu.objects.filter(server=s, index=1).update(status=GpuStatus.OK)
    workload_findings_refresh()
    assert open_findings() == []


def test_a_job_on_a_server_reconciliation_marks_wrong():
    s = servers("dgx-07")["dgx-07"]
    slurm_job("5679", {s: [0, 1]})
    wrong = Finding.objects.create(
        type=FindingType.DUPLICATE_IDENTITY,
        severity=Severity.CRITICAL,
        subject="server:test",
        message="dgx-07 and dgx-08 report one system UUID",
        server=s,
    )
    workload_findings_refresh()
    mine = Finding.objects.filter(type=FindingType.WORKLOAD_ON_MISRECONCILED_SERVER).get()
    assert mine.resolved_at is None and mine.details["findings"] == [wrong.pk]
    assert "one system UUID" in mine.message

    Finding.objects.filter(pk=wrong.pk).update(resolved_at=wrong.last_seen)
    workload_findings_refresh()
    mine.refresh_from_db()
    assert mine.resolved_at is not None


def test_the_pass_resolves_only_workloads_findings():
    other = Finding.objects.create(
        type=FindingType.GPU_FATAL_XID, severity="critical", subject="gpu:1", message="x"
    )
    assert workload_findings_refresh() == (0, 0, 0)
    other.refresh_from_db()
    assert other.resolved_at is None
    assert FindingType.STRAY_GPU_PROCESS.family == Family.WORKLOADS


def test_process_facts_of_a_silent_server_go_and_their_findings_resolve(settings):
    s = servers("dgx-07")["dgx-07"]
    report(s, {3: [proc(1)]})
    record_workload_facts.apply()
    assert open_findings()
    settings.ATLAS_PROCESS_FACTS_MAX_AGE_S = -1  # every report is too old now
    record_workload_facts.apply()
    assert GpuProcess.objects.count() == 0
    assert open_findings() == []


def _queries(n: int, prefix: str) -> int:
    fleet = servers(*(f"{prefix}-{i:02d}" for i in range(n)))
    ours = [s for name, s in sorted(fleet.items()) if name.startswith(prefix)]
    for i, s in enumerate(ours):
        job = f"{prefix}{i}"
        slurm_job(job, {s: [0, 1]})
        report(s, {0: [proc(1, workload=slurm(job))], 5: [proc(2, workload=slurm(job)), proc(3)]})
        Gpu.objects.filter(server=s, index=1).update(status=GpuStatus.ERROR)
    workload_facts_record()
    with CaptureQueriesContext(connection) as ctx:
        raised, _resolved, _open = workload_findings_refresh()
    assert raised == 3 * n
    return sum(1 for q in ctx.captured_queries if not q["sql"].startswith("INSERT"))


def test_the_findings_pass_costs_the_same_queries_for_2_and_20_servers():
    assert _queries(2, "a") == _queries(20, "b")


@pytest.mark.skipif(not REPORTS_PROCESSES, reason="the report schema has no processes yet")
def test_an_applied_report_is_followed_by_its_facts_and_findings():
    """Through ingest and the apply task, as an agent's report goes (in-process tasks)."""
    import json

    from inventory.services import agent_token_create, report_receive
    from inventory.tasks import apply_report
    from tests.reports import make_report

    payload = make_report("dgx-07", gpus=2)
    payload["gpus"][1]["processes"] = [proc(77, memory_mib=2048)]
    token, _ = agent_token_create(name="dgx-07")
    received = report_receive(token=token, body=json.dumps(payload).encode())
    assert apply_report.apply((received.report_id,)).get()["status"] == "applied"
    assert list(GpuProcess.objects.values_list("pid", flat=True)) == [77]
    assert open_findings() == [(FindingType.STRAY_GPU_PROCESS, Severity.WARNING)]
