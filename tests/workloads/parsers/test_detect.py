"""Detection: jobs listings are told from node listings both ways, and only
WorkloadFormatError ever leaves the parsers, with a path, for any broken input."""

from __future__ import annotations

import copy
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.parsers import parse_document, parse_snapshot, slurm_json
from clusters.parsers.records import SnapshotFormatError
from tests.fixtures.scheduler import sample_text
from workloads.parsers.detect import (
    looks_like_jobs_document,
    looks_like_jobs_text,
    parse_jobs_document,
    parse_jobs_text,
)
from workloads.records import WorkloadFormatError

from .inputs import JOB_SAMPLES, SAMPLE_V044, sample_json, workload_json, workload_text

JSON_FIXTURES = (
    "slurm-local-2205-running-slurmrestd-v0.0.38-jobs.json",
    "slurm-local-2205-running-squeue.json",
    "slurm-local-2205-after-cancel-slurmrestd-v0.0.38-job-4.json",
    "slurm-squeue-2302-v0.0.39-own.json",
    "slurm-squeue-2311-v0.0.40-own.json",
    "slurmdbd-v0.0.38-jobs-own.json",
    "slurm-sacct-2405-v0.0.41-own.json",
)
TEXT_FIXTURES = (
    "slurm-local-2205-running-scontrol-show-job-d.txt",
    "slurm-local-2205-running-scontrol-o-show-job-d.txt",
    "slurm-scontrol-show-job-d-own.txt",
    "slurm-scontrol-o-show-job-d-own.txt",
)
NODE_JSON_SAMPLES = (
    "slurm-local-2205-slurmrestd-v0.0.38-nodes.json",
    "slurm-local-2205-sinfo.json",
    "slurm-restd-v0.0.43-node-gpu-mixed-slurmweb.json",
    "slurm-sinfo-N-json-2302-dataparser-v0.0.39-nogpu-rivosinc.json",
)
NODE_TEXT_SAMPLES = (
    "slurm-local-2205-scontrol-show-node.txt",
    "slurm-local-2205-scontrol-o-show-node.txt",
)


def _all_job_documents():
    yield from ((name, sample_json(name)) for name in JOB_SAMPLES)
    yield from ((name, workload_json(name)) for name in JSON_FIXTURES)


@pytest.mark.parametrize(("name", "document"), list(_all_job_documents()))
def test_job_documents_are_jobs_and_never_node_snapshots(name, document):
    assert looks_like_jobs_document(document)
    assert not slurm_json.looks_like(document)
    with pytest.raises(SnapshotFormatError):
        parse_document(document)
    assert parse_jobs_document(document).workloads


@pytest.mark.parametrize("name", NODE_JSON_SAMPLES)
def test_a_node_listing_is_not_a_jobs_listing(name):
    document = json.loads(sample_text(name))
    assert not looks_like_jobs_document(document)
    with pytest.raises(WorkloadFormatError) as caught:
        parse_jobs_document(document)
    assert caught.value.path == "jobs"
    assert "node listing" in str(caught.value)


@pytest.mark.parametrize("name", TEXT_FIXTURES)
def test_job_text_is_jobs_and_never_a_node_snapshot(name):
    text = workload_text(name)
    assert looks_like_jobs_text(text)
    with pytest.raises(SnapshotFormatError):
        parse_snapshot(text)
    assert parse_jobs_text(text).format == "slurm-scontrol-jobs-text"


@pytest.mark.parametrize("name", NODE_TEXT_SAMPLES)
def test_node_text_is_not_a_jobs_listing(name):
    text = sample_text(name)
    assert not looks_like_jobs_text(text)
    with pytest.raises(WorkloadFormatError):
        parse_jobs_text(text)


def test_json_text_is_routed_by_its_records():
    assert parse_jobs_text(workload_text("slurmdbd-v0.0.38-jobs-own.json")).history
    assert parse_jobs_text(workload_text("slurm-squeue-2302-v0.0.39-own.json")).complete
    single = parse_jobs_text(
        workload_text("slurm-local-2205-running-slurmrestd-v0.0.38-job-4.json"), complete=False
    )
    assert not single.complete and not single.history
    assert looks_like_jobs_text(workload_text("slurm-sacct-2405-v0.0.41-own.json"))


def test_an_empty_jobs_listing_is_complete_and_empty():
    snapshot = parse_jobs_document({"jobs": [], "errors": []})
    assert snapshot.workloads == () and snapshot.complete


def test_json_cut_short_is_refused_without_echoing_it():
    text = workload_text("slurm-squeue-2302-v0.0.39-own.json")
    cut = text[: len(text) // 2]
    with pytest.raises(WorkloadFormatError) as caught:
        parse_jobs_text(cut)
    assert cut[-20:] not in str(caught.value)
    assert not looks_like_jobs_text(cut)


@pytest.mark.parametrize("document", [[], "jobs", 3, None, {"jobs": {}}, {"other": 1}])
def test_what_is_no_jobs_document_is_refused(document):
    with pytest.raises(WorkloadFormatError):
        parse_jobs_document(document)


@pytest.mark.parametrize("text", ["", "hello", "NodeName=x", "[1, 2]", "JobId=abc JobState=X"])
def test_what_is_no_jobs_text_is_refused(text):
    with pytest.raises(WorkloadFormatError):
        parse_jobs_text(text)


# -- fuzz: mutated real inputs raise WorkloadFormatError or parse, never anything else -----

# Bounded for every run; ATLAS_FUZZ_EXAMPLES (as the fuzz tier reads it) runs longer.
FUZZ = settings(
    max_examples=int(os.environ.get("ATLAS_FUZZ_EXAMPLES") or 60),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
JOB_KEYS = (
    "job_id", "job_state", "nodes", "node_count", "gres_detail", "tres_alloc_str",
    "tres_per_node", "tres_req_str", "tres_per_job", "array_job_id", "array_task_id",
    "array_task_string", "het_job_id", "het_job_offset", "submit_time", "start_time",
    "end_time", "user_name", "account", "partition", "name", "state", "time", "tres",
    "array", "het", "allocation_nodes",
)  # fmt: skip
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(
        ["gpu:h100:8(IDX:0-7)", "gpu(IDX:0,2-", "n[1-3]", "n[3-1]", "RUNNING", "gres/gpu:x"]
    ),
    st.lists(st.one_of(st.text(max_size=12), st.integers(), st.none()), max_size=4),
    st.dictionaries(
        st.sampled_from(["set", "infinite", "number", "current", "allocated", "start"]),
        st.one_of(
            st.booleans(), st.integers(), st.text(max_size=5), st.none(), st.lists(st.none())
        ),
        max_size=3,
    ),
)
DOCUMENTS = [document for _name, document in _all_job_documents()]


@FUZZ
@given(
    which=st.integers(min_value=0, max_value=len(DOCUMENTS) - 1),
    job=st.integers(min_value=0, max_value=20),
    key=st.sampled_from(JOB_KEYS),
    value=VALUES,
)
def test_mutated_documents_raise_only_workload_format_errors(which, job, key, value):
    document = copy.deepcopy(DOCUMENTS[which])
    jobs = document["jobs"]
    jobs[job % len(jobs)][key] = value
    try:
        parse_jobs_document(document)
    except WorkloadFormatError as error:
        assert error.path
        assert not (isinstance(value, str) and len(value) > 3 and value in str(error))


TEXTS = [workload_text(name) for name in TEXT_FIXTURES]


@FUZZ
@given(
    which=st.integers(min_value=0, max_value=len(TEXTS) - 1),
    at=st.floats(min_value=0, max_value=1),
    cut=st.booleans(),
    insert=st.text(alphabet="=()[]-,:% \nJobIdRESgpu0123456789", max_size=12),
)
def test_mutated_text_raises_only_workload_format_errors(which, at, cut, insert):
    text = TEXTS[which]
    where = int(len(text) * at)
    mutated = text[:where] if cut else text[:where] + insert + text[where:]
    try:
        parse_jobs_text(mutated)
    except WorkloadFormatError as error:
        assert error.path


def test_v0044_sample_survives_every_job_losing_each_key():
    """Each field Slurm might leave out, left out of every job in turn: parsed or refused."""
    base = sample_json(SAMPLE_V044)
    for key in JOB_KEYS:
        document = copy.deepcopy(base)
        for job in document["jobs"]:
            job.pop(key, None)
        try:
            parse_jobs_document(document)
        except WorkloadFormatError as error:
            assert error.path.startswith("jobs[")
