"""What the GPUs say, stored per server from its newest applied report: processes replaced
(never accumulated), joined to the workload their cgroup names, the kubelet's devices kept,
and a fixed number of queries however many servers."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inventory.models import Gpu, MigDevice
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
from workloads.models import GpuProcess, PodDevice, ServerWorkloadView
from workloads.services.facts import workload_facts_record

pytestmark = pytest.mark.django_db


def rows(server=None):
    qs = GpuProcess.objects.order_by("pid")
    if server is not None:
        qs = qs.filter(server=server)
    return [(p.pid, p.gpu.index if p.gpu else None, p.workload_id) for p in qs]


def test_processes_are_replaced_by_each_report_not_accumulated():
    s = servers("dgx-01")["dgx-01"]
    report(s, {0: [proc(100)], 1: [proc(101)]})
    assert workload_facts_record() == 1
    assert rows() == [(100, 0, None), (101, 1, None)]
    report(s, {3: [proc(200)]})
    assert workload_facts_record() == 1
    assert rows() == [(200, 3, None)]
    assert workload_facts_record() == 0  # nothing newer: a pass repeated does nothing
    assert rows() == [(200, 3, None)]


def test_only_the_newest_report_of_a_server_counts():
    s = servers("dgx-01")["dgx-01"]
    report(s, {0: [proc(100)]})
    report(s, {1: [proc(300)]})
    workload_facts_record()
    assert rows() == [(300, 1, None)]


def test_a_report_without_processes_says_nothing_about_them():
    s = servers("dgx-01")["dgx-01"]
    report(s, {0: [proc(100)]})
    workload_facts_record()
    assert ServerWorkloadView.objects.get(server=s).processes_reported is True
    report(s, None)  # an old agent
    workload_facts_record()
    assert rows() == []
    view = ServerWorkloadView.objects.get(server=s)
    assert view.processes_reported is False
    assert view.report_id == s.reports.order_by("-id").first().pk


def test_a_partial_report_replaces_only_the_gpus_it_names():
    s = servers("dgx-01")["dgx-01"]
    report(s, {0: [proc(100)], 5: [proc(105)]})
    workload_facts_record()
    report(s, {0: [proc(111)]}, partial=True, gpus=2)  # GPUs 0 and 1 only
    workload_facts_record()
    assert rows() == [(105, 5, None), (111, 0, None)]
    assert ServerWorkloadView.objects.get(server=s).processes_reported is True


def test_a_slurm_process_joins_its_job_on_the_servers_cluster():
    fleet = servers("dgx-01", "dgx-02")
    job = slurm_job("5679", {fleet["dgx-01"]: [0, 1]})
    other_cluster = slurm_job("5679", {fleet["dgx-02"]: [0]}, cluster="other")
    report(fleet["dgx-01"], {0: [proc(100, workload=slurm("5679"))]})
    report(fleet["dgx-02"], {0: [proc(200, workload=slurm("5679"))]})
    workload_facts_record()
    assert rows(fleet["dgx-01"]) == [(100, 0, job.pk)]
    assert rows(fleet["dgx-02"]) == [(200, 0, other_cluster.pk)]
    stored = GpuProcess.objects.get(pid=100)
    assert (stored.scheduler, stored.job_id, stored.step) == ("slurm", "5679", "0")
    assert stored.used_memory_bytes == 1024 * 2**20


def test_an_array_task_joins_by_its_raw_job_id():
    s = servers("dgx-01")["dgx-01"]
    task = slurm_job("5679_12", {s: [2]}, requested={"job_id": 5691})
    report(s, {2: [proc(100, workload=slurm("5691"))]})
    workload_facts_record()
    assert rows() == [(100, 2, task.pk)]


def test_a_process_of_an_unknown_job_or_no_job_has_no_workload():
    s = servers("dgx-01")["dgx-01"]
    slurm_job("1", {s: [0]})
    report(s, {0: [proc(100, workload=slurm("999"))], 1: [proc(101)]})
    workload_facts_record()
    assert rows() == [(100, 0, None), (101, 1, None)]


def test_a_pod_process_joins_its_pod_group_through_the_kubelets_devices():
    s = servers("gpu-k01")["gpu-k01"]
    group = pod_group("ml/trainer", s, {"trainer-0": [0], "trainer-1": [1]})
    view = pods_view(
        ("ml", "trainer-0", "main", [gpu_uuid("gpu-k01", 0)]),
        ("ml", "trainer-1", "main", [gpu_uuid("gpu-k01", 1) + "::2"]),  # a time-sliced replica
    )
    # uid-b runs on GPU 1 (its own) and GPU 5 (no pod's): both join trainer-1's group.
    report(
        s,
        {
            0: [proc(10, workload=pod("uid-a"))],
            1: [proc(11, workload=pod("uid-b"))],
            5: [proc(12, workload=pod("uid-b")), proc(13, workload=pod("uid-x"))],
        },
        pod_resources=view,
    )
    workload_facts_record()
    assert rows() == [(10, 0, group.pk), (11, 1, group.pk), (12, 5, group.pk), (13, 5, None)]
    assert sorted(PodDevice.objects.values_list("pod", "device_id")) == [
        ("trainer-0", gpu_uuid("gpu-k01", 0)),
        ("trainer-1", gpu_uuid("gpu-k01", 1) + "::2"),
    ]
    view = ServerWorkloadView.objects.get(server=s)
    assert (view.pod_resources_available, view.pod_resources_error) == (True, "")


def test_a_pod_process_joins_its_pod_group_by_the_uids_of_its_pods():
    s = servers("gpu-k01")["gpu-k01"]
    group = pod_group("ml/trainer", s, {"trainer-0": [0]}, uids=["uid-a"])
    report(s, {0: [proc(10, workload=pod("uid-a"))], 3: [proc(11, workload=pod("uid-z"))]})
    workload_facts_record()  # no kubelet view: the UIDs alone
    assert rows() == [(10, 0, group.pk), (11, 3, None)]


def test_without_the_kubelets_view_the_server_says_so():
    s = servers("gpu-k01")["gpu-k01"]
    report(s, {0: [proc(10, workload=pod("uid-a"))]}, pod_resources=pods_view(available=False))
    workload_facts_record()
    view = ServerWorkloadView.objects.get(server=s)
    assert (view.pod_resources_available, view.pod_resources_error) == (False, "no socket")
    assert rows() == [(10, 0, None)]
    assert PodDevice.objects.count() == 0


def test_a_process_on_a_mig_device_names_it():
    s = servers("dgx-m1", mig_gpus={0: ["1g.10gb", "1g.10gb"]})["dgx-m1"]
    report(s, {}, mig={0: ["1g.10gb", "1g.10gb"]}, mig_processes={(0, 1): [proc(7)]})
    workload_facts_record()
    stored = GpuProcess.objects.get()
    mig = MigDevice.objects.get(uuid=stored.gpu_uuid)
    assert stored.mig_device_id == mig.pk
    assert stored.gpu == Gpu.objects.get(server=s, index=0)
    assert mig.gpu_instance_id == 2


def test_since_report_id_leaves_older_reports_alone():
    fleet = servers("dgx-01", "dgx-02")
    first = report(fleet["dgx-01"], {0: [proc(1)]})
    report(fleet["dgx-02"], {0: [proc(2)]})
    assert workload_facts_record(since_report_id=first.pk) == 1
    assert [p for p, _i, _w in rows()] == [2]


def _queries(n: int, prefix: str) -> int:
    fleet = servers(*(f"{prefix}-{i:02d}" for i in range(n)))
    ours = [s for name, s in sorted(fleet.items()) if name.startswith(prefix)]
    for i, s in enumerate(ours):
        job = f"{prefix}{i}"
        slurm_job(job, {s: [0, 1]})
        report(
            s,
            {g: [proc(10 * g + 1, workload=slurm(job)), proc(10 * g + 2)] for g in range(8)},
            pod_resources=pods_view(("ml", f"p-{i}", "main", [gpu_uuid(s.hostname, 0)])),
        )
    with CaptureQueriesContext(connection) as ctx:
        assert workload_facts_record() == n
    stored = GpuProcess.objects.filter(server__hostname__startswith=prefix)
    assert stored.count() == 16 * n
    assert stored.filter(workload__isnull=False).count() == 8 * n
    # SQLite caps the parameters of one INSERT, so bulk inserts split by rows there; every
    # other query is one per batch of servers.
    return sum(1 for q in ctx.captured_queries if not q["sql"].startswith("INSERT"))


def test_the_pass_costs_the_same_queries_for_2_and_20_servers():
    assert _queries(2, "a") == _queries(20, "b")


def test_a_report_that_cannot_be_stored_stops_no_other_server(monkeypatch, caplog):
    from workloads.services import facts as facts_module

    fleet = servers("dgx-01", "dgx-02")
    report(fleet["dgx-01"], {0: [proc(666)]})
    report(fleet["dgx-02"], {0: [proc(2)]})
    real = facts_module._processes

    def poisoned(facts, item, gpu, device, mig):
        if any(p.get("pid") == 666 for p in item.get("processes") or []):
            raise ValueError("boom")
        real(facts, item, gpu, device, mig)

    monkeypatch.setattr(facts_module, "_processes", poisoned)
    assert workload_facts_record() == 2
    assert rows() == [(2, 0, None)]
    assert "not stored" in caplog.text
    assert ServerWorkloadView.objects.get(server=fleet["dgx-01"]).processes_reported is False
    assert workload_facts_record() == 0  # not due again until its next report
