"""``scontrol show job -d`` text, multi-line and ``-o``, read to the last field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from workloads.parsers.scontrol_job import FORMAT, parse_scontrol_jobs
from workloads.parsers.slurm_jobs_json import parse_jobs_json
from workloads.records import WorkloadFormatError

from .inputs import by_id, shape, workload_json, workload_text

LOCAL = {
    "1": ("completed", {"gpu-node1": []}),
    "2": ("failed", {"gpu-node1": []}),
    "3": ("running", {"gpu-node1": [0, 1, 2]}),
    "4": ("running", {"gpu-node2": list(range(8)), "gpu-node3": list(range(8))}),
    "5_1": ("running", {"gpu-node1": [3]}),
    "5_2": ("running", {"gpu-node4": [0]}),
    "5_3": ("running", {"gpu-node4": [1]}),
    "6": ("pending", {}),
}


@pytest.mark.parametrize("layout", ["scontrol-show-job-d", "scontrol-o-show-job-d"])
def test_local_2205_text_holds_exactly_the_nodes_and_indices_slurm_gave(layout):
    snapshot = parse_scontrol_jobs(workload_text(f"slurm-local-2205-running-{layout}.txt"))

    assert snapshot.format == FORMAT and snapshot.complete and not snapshot.history
    jobs = by_id(snapshot)
    assert {k: (w.state, shape(w)) for k, w in jobs.items()} == LOCAL
    assert [jobs["5_1"].allocations[0].cpus, jobs["4"].allocations[1].cpus] == ["1", "0"]
    assert (jobs["4"].gpu_count, jobs["4"].gpus_per_node, jobs["4"].node_count) == (16, 8, 2)
    assert (jobs["6"].gpu_count, jobs["6"].node_count) == (32, 4)  # NumNodes=4-4
    assert jobs["1"].gpu_count == 1  # JOB_GRES=gpu:h100:1 though its GRES= is now empty
    assert jobs["1"].submitted_at == datetime(2026, 12, 2, 5, 52, 2, tzinfo=UTC)
    assert jobs["3"].ended_at is None  # EndTime=Unknown
    assert jobs["6"].started_at is None  # StartTime=Unknown
    assert (jobs["3"].user, jobs["3"].account, jobs["3"].name) == ("root", "", "three")


@pytest.mark.parametrize("phase", ["running", "after-cancel"])
def test_text_and_json_captured_together_agree(phase):
    text = by_id(
        parse_scontrol_jobs(workload_text(f"slurm-local-2205-{phase}-scontrol-show-job-d.txt"))
    )
    json = by_id(
        parse_jobs_json(workload_json(f"slurm-local-2205-{phase}-slurmrestd-v0.0.38-jobs.json"))
    )

    assert text.keys() == json.keys()
    for key, record in text.items():
        other = json[key]
        assert (record.state, shape(record), record.node_count) == (
            other.state,
            shape(other),
            other.node_count,
        )
        assert (record.submitted_at, record.started_at, record.ended_at) == (
            other.submitted_at,
            other.started_at,
            other.ended_at,
        )
        assert (record.gpu_count, record.gpus_per_node) == (other.gpu_count, other.gpus_per_node)


def test_after_cancel_the_text_marks_the_job_cancelled():
    jobs = by_id(
        parse_scontrol_jobs(workload_text("slurm-local-2205-after-cancel-scontrol-show-job-d.txt"))
    )
    assert jobs["3"].state == "cancelled" and not jobs["3"].holds_gpus
    assert jobs["3"].ended_at == datetime(2026, 12, 2, 5, 52, 8, tzinfo=UTC)


@pytest.mark.parametrize(
    "name", ["slurm-scontrol-show-job-d-own.txt", "slurm-scontrol-o-show-job-d-own.txt"]
)
def test_every_spelling_of_the_per_node_detail(name):
    jobs = by_id(parse_scontrol_jobs(workload_text(name)))

    assert list(jobs) == ["5679_12", "5679_[13-20]", "5680+0", "5680+1"]
    task = jobs["5679_12"]
    assert (task.state, task.user, task.account, task.partition, task.name) == (
        "running",
        "alice",
        "vision",
        "gpu",
        "sweep run",
    )
    # Nodes=gpu[01-02] ... GRES=gpu:h100:4(IDX:0-3), then gpu03 with typed and count GRES
    assert shape(task) == {"gpu01": [0, 1, 2, 3], "gpu02": [0, 1, 2, 3], "gpu03": [0, 1, 3]}
    assert [g.gpu_type for g in task.allocations[2].gpus] == ["h100", "h100", None]
    assert task.allocations[2].cpus.endswith(",112,115-")  # Slurm's own cut list, kept
    assert (task.gpu_count, task.gpus_per_node, task.node_count) == (11, 4, 3)  # TRES gres/gpu=11
    assert task.started_at == datetime(2023, 11, 14, 22, 15, tzinfo=UTC)
    assert task.ended_at is None  # a running job's EndTime is its limit
    pending = jobs["5679_[13-20]"]
    assert (pending.state, pending.allocations, pending.node_count) == ("pending", (), 1)
    assert pending.started_at is None  # StartTime of a pending job is an estimate
    assert pending.gpu_count == 4
    het = jobs["5680+0"]
    assert het.state == "cancelled" and het.user == "bob"
    assert shape(het) == {"old1": [0, 2, 3], "old2": [0, 1, 2, 3]}  # GRES_IDX=gpu(IDX:0,2-3)
    assert het.ended_at == datetime(2023, 11, 14, 23, 0, tzinfo=UTC)
    assert het.gpu_count == 8  # JOB_GRES=gpu:8
    cpu_only = jobs["5680+1"]
    assert (cpu_only.state, shape(cpu_only), cpu_only.gpu_count) == ("timeout", {"cpu17": []}, 0)


@pytest.mark.parametrize("tz", [ZoneInfo("Europe/Paris"), timezone(timedelta(hours=-5))])
def test_times_are_read_in_the_clusters_zone(tz):
    jobs = by_id(parse_scontrol_jobs(workload_text("slurm-scontrol-show-job-d-own.txt"), tz=tz))
    started = jobs["5679_12"].started_at
    assert started == datetime(2023, 11, 14, 22, 15, tzinfo=tz)
    assert started.utcoffset() == tz.utcoffset(datetime(2023, 11, 14, 22, 15))


def test_no_jobs_is_an_empty_complete_listing():
    snapshot = parse_scontrol_jobs("No jobs in the system\n")
    assert snapshot.workloads == () and snapshot.complete


OWN = "slurm-scontrol-show-job-d-own.txt"


def _refused(text: str) -> WorkloadFormatError:
    with pytest.raises(WorkloadFormatError) as caught:
        parse_scontrol_jobs(text)
    return caught.value


def test_a_capture_cut_inside_an_idx_list_is_refused():
    text = workload_text(OWN)
    cut = text[: text.index("GRES=gpu:h100:4(IDX:0-") + len("GRES=gpu:h100:4(IDX:0-")]
    error = _refused(cut)
    assert error.path == "jobs[0].GRES"


def test_a_capture_cut_before_the_job_state_is_refused():
    text = workload_text(OWN)
    cut = text[: text.index("JobState=PENDING")]
    assert _refused(cut).path == "jobs[1].JobState"


def test_a_capture_cut_inside_a_field_name_is_refused():
    text = workload_text(OWN)
    cut = text[: text.index("TresPerNode=gres:gpu:4") + len("TresPer")]
    assert _refused(cut).path == "jobs[0]"


def test_a_nodelist_that_does_not_match_num_nodes_is_refused():
    text = workload_text(OWN).replace("NodeList=gpu[01-03]", "NodeList=gpu[01-02]", 1)
    assert _refused(text).path == "jobs[0].NodeList"


def test_a_detail_line_naming_a_node_the_job_does_not_hold_is_refused():
    text = workload_text(OWN).replace("Nodes=gpu03 ", "Nodes=gpu09 ", 1)
    assert _refused(text).path == "jobs[0].Nodes"


def test_an_index_beyond_any_gpu_is_refused_without_echoing_it():
    text = workload_text(OWN).replace("gpu:1(IDX:3)", "gpu:1(IDX:99999)", 1)
    error = _refused(text)
    assert error.path == "jobs[0].GRES" and "99999" not in str(error)


def test_an_older_spelling_with_a_bad_index_names_gres_idx():
    text = workload_text(OWN).replace("GRES_IDX=gpu(IDX:0,2-3)", "GRES_IDX=gpu(IDX:3-0)", 1)
    assert _refused(text).path == "jobs[2].GRES_IDX"


def test_a_bad_time_is_refused_with_its_field():
    text = workload_text(OWN).replace("SubmitTime=2023-11-14T22:16:40", "SubmitTime=yesterday", 1)
    assert _refused(text).path == "jobs[2].SubmitTime"


@pytest.mark.parametrize("layout", ["scontrol-show-job-d", "scontrol-o-show-job-d"])
def test_a_capture_cut_between_two_lines_of_the_last_record_is_refused(layout):
    text = workload_text(f"slurm-local-2205-running-{layout}.txt")
    last = text.rindex("JobId=")
    cut = text[: text.index("MinCPUsNode=", last)].rstrip(" ")
    if "-o-" in layout:
        cut = cut.rstrip() + "\n"  # a one-line record cut, then a newline added
    error = _refused(cut)
    assert error.path == "jobs[7].Command"  # the first of the always-printed keys it lacks


def test_a_whole_listing_without_its_final_blank_line_still_reads():
    text = workload_text("slurm-local-2205-running-scontrol-show-job-d.txt")
    assert len(parse_scontrol_jobs(text.rstrip() + "\n").workloads) == 8
    assert len(parse_scontrol_jobs(text.rstrip()).workloads) == 8
