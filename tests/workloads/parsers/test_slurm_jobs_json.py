"""slurmctld jobs JSON (slurmrestd v0.0.38-v0.0.44, squeue --json) read to the last field."""

from __future__ import annotations

import copy

import pytest

from workloads.parsers.slurm_jobs_json import FORMAT, parse_jobs_json
from workloads.records import TERMINAL, WorkloadFormatError

from .inputs import SAMPLE_V041, SAMPLE_V042, SAMPLE_V044, by_id, sample_json, shape, utc
from .inputs import workload_json as fixture


def test_v0041_job_holds_one_gpu_on_each_of_two_nodes():
    snapshot = parse_jobs_json(sample_json(SAMPLE_V041), complete=False)

    assert (snapshot.format, snapshot.scheduler, snapshot.source_version) == (
        FORMAT,
        "slurm",
        "24.05.3",
    )
    assert snapshot.complete is False and snapshot.history is False
    (job,) = snapshot.workloads
    assert (job.scheduler_id, job.kind, job.state, job.raw_state) == (
        "13",
        "slurm_job",
        "running",
        "RUNNING",
    )
    assert (job.user, job.account, job.partition, job.name) == ("jbeck", "biology", "gpu", "wrap")
    assert (job.node_count, job.gpus_per_node, job.gpu_count) == (2, 1, 2)
    assert shape(job) == {"gpu1": [0], "gpu2": [0]}
    assert [a.gpu_count for a in job.allocations] == [1, 1]
    assert {g.gpu_type for a in job.allocations for g in a.gpus} == {"h100"}
    assert job.submitted_at == utc(1762529694) and job.started_at == utc(1762529694)
    assert job.ended_at is None  # a running job's end_time is its limit, not an end
    assert job.holds_gpus and not job.history_only
    assert "gres/gpu" not in job.requested["tres_alloc_str"]  # GPUs not accounted as TRES


def test_v0042_one_node_two_gpu_types_in_one_gres_detail_string():
    (job,) = parse_jobs_json(sample_json(SAMPLE_V042), complete=False).workloads

    assert (job.scheduler_id, job.state, job.user, job.account, job.partition) == (
        "6356",
        "running",
        "sevans",
        "optic",
        "ia",
    )
    assert shape(job) == {"ia1": [0, 2]}
    (allocation,) = job.allocations
    assert [(g.index, g.gpu_type) for g in allocation.gpus] == [(0, "h100"), (2, "h200")]
    assert allocation.gpu_count == 2
    # No GPU in tres_alloc_str: the count comes from gres_detail, the request per node says 2.
    assert (job.gpu_count, job.gpus_per_node, job.node_count) == (2, 2, 1)
    assert job.started_at == utc(1762788764)


V044_STATES = {
    5736: "cancelled",
    5737: "timeout",
    5738: "completed",
    5739: "failed",
    5740: "completed",
    5741: "completed",
    5742: "completed",
    5743: "completed",
    5744: "completed",
    5745: "running",
    5746: "running",
    5747: "running",
    5748: "running",
    5749: "completed",
    5750: "pending",
}


def test_v0044_fifteen_jobs_in_every_state_none_holding_a_gpu():
    snapshot = parse_jobs_json(sample_json(SAMPLE_V044))

    assert snapshot.complete is True and snapshot.source_version == "25.11.0"
    jobs = by_id(snapshot)
    assert {int(k): w.state for k, w in jobs.items()} == V044_STATES
    for scheduler_id, job in jobs.items():
        assert not job.holds_gpus
        assert all(a.gpu_count == 0 and a.gpus == () for a in job.allocations)
        if scheduler_id == "5750":
            continue
        expected_user = "rcarson" if scheduler_id == "5736" else "vhartman"
        assert job.user == expected_user
        assert [a.node for a in job.allocations] == ["gpu1" if scheduler_id == "5736" else "cn1"]
        assert job.node_count == 1
    assert jobs["5736"].gpu_count == 4  # what it asked for (tres_per_job), never held
    assert all(j.gpu_count == 0 for k, j in jobs.items() if k != "5736")
    assert (jobs["5736"].account, jobs["5736"].partition) == ("optic", "gpu")
    assert jobs["5738"].ended_at == utc(1762942462)
    assert jobs["5737"].ended_at == utc(1762942539)
    assert jobs["5745"].ended_at is None


def test_v0044_pending_job_has_no_nodes_and_no_start():
    pending = by_id(parse_jobs_json(sample_json(SAMPLE_V044)))["5750"]

    assert pending.state == "pending" and pending.allocations == ()
    assert pending.node_count == 2  # what it asked for
    assert pending.submitted_at == utc(1762942475)
    assert pending.started_at is None and pending.ended_at is None  # estimates only


LOCAL_RUNNING = {
    "1": ("completed", {"gpu-node1": []}),
    "2": ("failed", {"gpu-node1": []}),
    "3": ("running", {"gpu-node1": [0, 1, 2]}),
    "4": ("running", {"gpu-node2": list(range(8)), "gpu-node3": list(range(8))}),
    "5_1": ("running", {"gpu-node1": [3]}),
    "5_2": ("running", {"gpu-node4": [0]}),
    "5_3": ("running", {"gpu-node4": [1]}),
    "6": ("pending", {}),
}


@pytest.mark.parametrize(
    "name",
    [
        "slurm-local-2205-running-slurmrestd-v0.0.38-jobs.json",
        "slurm-local-2205-running-squeue.json",
    ],
)
def test_local_2205_listing_holds_exactly_the_nodes_and_indices_slurm_gave(name):
    snapshot = parse_jobs_json(fixture(name))

    assert snapshot.source_version == "22.05.8" and snapshot.complete
    jobs = by_id(snapshot)
    assert {k: (w.state, shape(w)) for k, w in jobs.items()} == LOCAL_RUNNING
    assert {w.user for w in jobs.values()} == {"root"}
    assert {w.partition for w in jobs.values()} == {"gpu"}
    assert [(k, jobs[k].gpu_count, jobs[k].gpus_per_node) for k in ("1", "3", "4", "5_1", "6")] == [
        ("1", 1, 1),  # ended: GPUs released, the request still says 1
        ("3", 3, 3),
        ("4", 16, 8),
        ("5_1", 1, 1),
        ("6", 32, 8),
    ]
    assert jobs["6"].node_count == 4 and jobs["4"].node_count == 2
    assert {g.gpu_type for a in jobs["4"].allocations for g in a.gpus} == {"h100"}
    assert jobs["1"].submitted_at == utc(1796190722)
    assert jobs["1"].started_at == jobs["1"].ended_at == utc(1796190724)
    assert jobs["3"].started_at == utc(1796190727) and jobs["3"].ended_at is None
    assert [j.name for j in (jobs["1"], jobs["4"], jobs["5_2"])] == ["quick", "two-nodes", "arr"]


def test_local_2205_after_cancel_marks_the_job_cancelled_and_frees_its_gpus():
    jobs = by_id(
        parse_jobs_json(fixture("slurm-local-2205-after-cancel-slurmrestd-v0.0.38-jobs.json"))
    )

    assert jobs["3"].state == "cancelled" and jobs["3"].state in TERMINAL
    assert shape(jobs["3"]) == {"gpu-node1": []} and not jobs["3"].holds_gpus
    assert jobs["3"].ended_at == utc(1796190728)
    assert shape(jobs["4"]) == LOCAL_RUNNING["4"][1]


def test_local_2205_single_job_response_is_not_complete():
    snapshot = parse_jobs_json(
        fixture("slurm-local-2205-running-slurmrestd-v0.0.38-job-4.json"), complete=False
    )
    assert snapshot.complete is False
    assert [(w.scheduler_id, shape(w)) for w in snapshot.workloads] == [
        ("4", LOCAL_RUNNING["4"][1])
    ]


@pytest.mark.parametrize(
    ("name", "version", "het_raw"),
    [
        ("slurm-squeue-2302-v0.0.39-own.json", "23.02.5", "RUNNING"),
        ("slurm-squeue-2311-v0.0.40-own.json", "23.11.10", "RUNNING+COMPLETING"),
    ],
)
def test_squeue_json_arrays_het_jobs_mig_and_terminal_states(name, version, het_raw):
    snapshot = parse_jobs_json(fixture(name))

    assert snapshot.source_version == version
    jobs = by_id(snapshot)
    assert {k: w.state for k, w in jobs.items()} == {
        "5679_12": "running",
        "5679_[13-20]": "pending",  # one pending array record; the throttle (%4) left out
        "5680+0": "running",
        "5680+1": "running",
        "5682": "node_fail",
        "5683": "preempted",
        "5684": "out_of_memory",
    }
    assert shape(jobs["5679_12"]) == {"dgx-07": [4, 5]}
    assert jobs["5679_12"].gpu_count == 2  # from tres_alloc_str
    assert jobs["5679_[13-20]"].allocations == () and jobs["5679_[13-20]"].gpu_count == 2
    assert shape(jobs["5680+0"]) == {"dgx-01": list(range(8)), "dgx-02": list(range(8))}
    assert jobs["5680+0"].raw_state == het_raw and jobs["5680+0"].gpu_count == 16
    # typed and count GRES in one string: gpu:h100:2(IDX:0-1),gpu:1(IDX:3)
    (mixed,) = jobs["5680+1"].allocations
    assert [(g.index, g.gpu_type) for g in mixed.gpus] == [(0, "h100"), (1, "h100"), (3, None)]
    assert mixed.gpu_count == 3 and jobs["5680+1"].gpus_per_node == 3
    (mig,) = jobs["5682"].allocations
    assert [(g.index, g.mig_profile) for g in mig.gpus] == [(7, "1g.10gb"), (8, "1g.10gb")]
    assert jobs["5682"].ended_at == utc(1700000900)
    assert jobs["5683"].gpu_count == 4 and shape(jobs["5683"]) == {"dgx-05": []}
    assert jobs["5684"].gpu_count == 1  # tres_per_job gres:gpu:1
    assert (jobs["5679_12"].user, jobs["5680+0"].user) == ("alice", "bob")
    assert jobs["5679_12"].started_at == utc(1700000100)


def _local() -> dict:
    return copy.deepcopy(fixture("slurm-local-2205-running-slurmrestd-v0.0.38-jobs.json"))


def _job(document: dict, scheduler_id: int) -> dict:
    return next(j for j in document["jobs"] if j["job_id"] == scheduler_id)


def _refused(document: dict) -> WorkloadFormatError:
    with pytest.raises(WorkloadFormatError) as caught:
        parse_jobs_json(document)
    return caught.value


def _index_of(document: dict, job_id: int) -> int:
    return next(i for i, j in enumerate(document["jobs"]) if j["job_id"] == job_id)


def test_slurm_errors_refuse_the_listing():
    document = _local()
    document["errors"] = [{"error": "secret-token-xyz", "error_number": 1}]
    error = _refused(document)
    assert error.path == "errors" and "secret-token-xyz" not in str(error)


def test_a_gres_detail_count_that_does_not_match_the_nodes_is_refused():
    document = _local()
    _job(document, 4)["gres_detail"] = ["gpu:h100:8(IDX:0-7)"]
    assert _refused(document).path == f"jobs[{_index_of(document, 4)}].gres_detail"


def test_a_node_count_that_disagrees_with_the_nodes_is_refused():
    document = _local()
    _job(document, 4)["node_count"] = 3
    assert _refused(document).path == f"jobs[{_index_of(document, 4)}].node_count"


@pytest.mark.parametrize(
    "detail",
    ["gpu:h100:1(IDX:4097)", "gpu:h100:2(IDX:0-", "gpu:h100:1(IDX:x)", "gpu:h100:2(IDX:1,1)"],
)
def test_an_impossible_gpu_index_is_refused_with_its_path(detail):
    document = _local()
    _job(document, 4)["gres_detail"][1] = detail
    error = _refused(document)
    assert error.path == f"jobs[{_index_of(document, 4)}].gres_detail[1]"
    assert detail not in str(error)


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("node_count", -2, "node_count"),
        ("start_time", -5, "start_time"),
        ("job_id", "4", "job_id"),
        ("job_state", 7, "job_state"),
        ("gres_detail", "gpu:h100:8(IDX:0-7)", "gres_detail"),
        ("nodes", 12, "nodes"),
        ("nodes", "gpu-node[2-", "nodes"),
        ("submit_time", 10**30, "submit_time"),
        ("tres_per_node", {"gres": 8}, "tres_per_node"),
    ],
)
def test_a_malformed_field_is_refused_with_its_path(field, value, where):
    document = _local()
    index = _index_of(document, 4)
    document["jobs"][index][field] = value
    error = _refused(document)
    assert error.path == f"jobs[{index}].{where}"
    assert str(value) not in str(error)


def test_a_completing_job_may_hold_fewer_nodes_than_its_count():
    document = _local()
    job = _job(document, 4)
    job["job_state"] = "COMPLETING"
    job["node_count"] = 1  # Slurm gives nodes back one by one
    (record,) = [w for w in parse_jobs_json(document).workloads if w.scheduler_id == "4"]
    assert record.state == "running" and record.node_count == 2


def test_a_job_that_is_not_an_object_is_refused():
    document = _local()
    document["jobs"].append(["not", "a", "job"])
    assert _refused(document).path == f"jobs[{len(document['jobs']) - 1}]"
