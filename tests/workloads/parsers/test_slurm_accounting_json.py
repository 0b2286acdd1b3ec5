"""Accounting (sacct --json, slurmdbd /jobs): history with GPU counts, never GPU indices."""

from __future__ import annotations

import pytest

from workloads.parsers.slurm_accounting_json import FORMAT, parse_accounting_json
from workloads.records import WorkloadFormatError

from .inputs import by_id, utc, workload_json

DBD = "slurmdbd-v0.0.38-jobs-own.json"
SACCT = "slurm-sacct-2405-v0.0.41-own.json"


@pytest.mark.parametrize("name", [DBD, SACCT])
def test_accounting_is_history_with_no_gpu_slots(name):
    snapshot = parse_accounting_json(workload_json(name))

    assert snapshot.format == FORMAT
    assert snapshot.history is True and snapshot.complete is False
    for job in snapshot.workloads:
        assert job.history_only and not job.holds_gpus
        assert all(a.gpus == () and a.gpu_count == 0 for a in job.allocations)


def test_slurmdbd_v0038_counts_gpus_from_allocated_tres():
    jobs = by_id(parse_accounting_json(workload_json(DBD)))

    assert list(jobs) == ["4101", "4102", "4103"]  # steps are not workloads
    done = jobs["4101"]
    assert (done.state, done.user, done.account, done.partition, done.name) == (
        "completed",
        "alice",
        "vision",
        "gpu",
        "train-16",
    )
    assert done.gpu_count == 16  # the untyped gres/gpu, not 16 + 16 with gpu:h100
    assert [a.node for a in done.allocations] == ["dgx-01", "dgx-02"]
    assert done.node_count == 2
    assert (done.submitted_at, done.started_at, done.ended_at) == (
        utc(1700000000),
        utc(1700000100),
        utc(1700003700),
    )


def test_a_slurmdbd_job_with_no_gpu_in_its_tres_yields_no_gpus():
    job = by_id(parse_accounting_json(workload_json(DBD)))["4102"]

    assert job.state == "failed" and job.gpu_count == 0
    assert [(a.node, a.gpu_count, a.gpus) for a in job.allocations] == [("gpu-node1", 0, ())]


def test_a_pending_accounting_job_has_no_nodes_and_counts_what_it_asked_for():
    job = by_id(parse_accounting_json(workload_json(DBD)))["4103"]

    assert job.state == "pending" and job.allocations == ()  # "None assigned"
    assert job.gpu_count == 8 and job.started_at is None


def test_sacct_v0041_array_task_het_component_and_typed_tres():
    jobs = by_id(parse_accounting_json(workload_json(SACCT)))

    assert list(jobs) == ["5679_12", "5680+1"]
    task = jobs["5679_12"]
    assert (task.state, task.gpu_count, task.user) == ("out_of_memory", 2, "alice")  # gpu:h100=2
    assert task.ended_at == utc(1700000700)
    het = jobs["5680+1"]
    assert (het.state, het.gpu_count, het.ended_at) == ("running", 3, None)
    assert parse_accounting_json(workload_json(SACCT)).source_version == "24.05.3"


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda j: j["tres"].__setitem__("allocated", "gres/gpu=8"), "jobs[0].tres.allocated"),
        (
            lambda j: j["tres"]["allocated"][4].__setitem__("count", -1),
            "jobs[0].tres.allocated[4].count",
        ),
        (lambda j: j.__setitem__("state", "COMPLETED"), "jobs[0].state"),
        (lambda j: j["time"].__setitem__("start", "noon"), "jobs[0].time.start"),
        (lambda j: j.__setitem__("nodes", "dgx-[01-"), "jobs[0].nodes"),
    ],
)
def test_a_malformed_accounting_field_is_refused_with_its_path(mutate, path):
    document = workload_json(DBD)
    mutate(document["jobs"][0])
    with pytest.raises(WorkloadFormatError) as caught:
        parse_accounting_json(document)
    assert caught.value.path == path
