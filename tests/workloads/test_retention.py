"""Ended workloads past the retention window are summed per cluster, day, kind, user and
account, then deleted with their allocations; running twice is running once."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from tests.workloads.gpu_facts import servers, slurm_job
from workloads.models import Allocation, Workload, WorkloadSummary
from workloads.services.retention import workloads_summarise

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
OLD_END = NOW - timedelta(days=40)


def ended(job: str, server, gpus: list[int], *, user="alice", state="completed", end=OLD_END):
    w = slurm_job(job, {server: gpus}, user=user, state=state, ended_at=end)
    Allocation.objects.filter(workload=w).update(since=end - timedelta(hours=2), until=end)
    return w


def test_old_ended_workloads_are_summed_and_deleted(settings):
    settings.ATLAS_WORKLOAD_RETENTION_DAYS = 30
    s = servers("dgx-01")["dgx-01"]
    ended("1", s, [0, 1])  # 2 GPUs x 2 h
    ended("2", s, [2], state="failed")  # 1 GPU x 2 h
    ended("3", s, [3], user="bob")
    recent = ended("4", s, [4], end=NOW - timedelta(days=3))
    running = slurm_job("5", {s: [5]})

    assert workloads_summarise(now=NOW) == 3

    assert set(Workload.objects.values_list("pk", flat=True)) == {recent.pk, running.pk}
    assert Allocation.objects.filter(workload__scheduler_id__in=["1", "2", "3"]).count() == 0
    rows = {
        (r.user, r.day): (r.workloads, r.gpu_seconds, r.states)
        for r in WorkloadSummary.objects.all()
    }
    day = OLD_END.date()
    assert rows == {
        ("alice", day): (2, 3 * 7200, {"completed": 1, "failed": 1}),
        ("bob", day): (1, 7200, {"completed": 1}),
    }
    assert WorkloadSummary.objects.get(user="alice").kind == "slurm_job"
    assert WorkloadSummary.objects.get(user="alice").account == "research"


def test_summarising_twice_is_summarising_once():
    s = servers("dgx-01")["dgx-01"]
    ended("1", s, [0])
    assert workloads_summarise(now=NOW) == 1
    assert workloads_summarise(now=NOW) == 0
    (row,) = WorkloadSummary.objects.all()
    assert (row.workloads, row.gpu_seconds) == (1, 7200)


def test_a_later_pass_adds_to_the_days_summary():
    s = servers("dgx-01")["dgx-01"]
    ended("1", s, [0])
    workloads_summarise(now=NOW, batch=1)
    ended("2", s, [1], state="timeout")
    ended("3", s, [2])
    assert workloads_summarise(now=NOW, batch=1) == 2  # batches of one, added each time
    (row,) = WorkloadSummary.objects.all()
    assert (row.workloads, row.gpu_seconds) == (3, 3 * 7200)
    assert row.states == {"completed": 2, "timeout": 1}
    assert row.day == date(2026, 10, 23)


def test_a_workload_known_by_count_alone_sums_its_count_times_its_run():
    s = servers("dgx-01")["dgx-01"]
    w = slurm_job("1", {}, state="completed", ended_at=OLD_END)
    Workload.objects.filter(pk=w.pk).update(gpu_count=4, started_at=OLD_END - timedelta(hours=1))
    assert s and workloads_summarise(now=NOW) == 1
    assert WorkloadSummary.objects.get().gpu_seconds == 4 * 3600
