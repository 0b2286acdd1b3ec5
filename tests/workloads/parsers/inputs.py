"""Inputs of the workload parser tests: the real samples and tests/fixtures/workloads/."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.fixtures.scheduler import sample_text

WORKLOADS = Path(__file__).resolve().parents[2] / "fixtures" / "workloads"

SAMPLE_V041 = "slurm-restd-v0.0.41-job-13-gpu-per-node-2405-slurmweb.json"
SAMPLE_V042 = "slurm-restd-v0.0.42-job-6356-h100-h200-one-node-2411-slurmweb.json"
SAMPLE_V044 = "slurm-restd-v0.0.44-jobs-15-nogpu-2511-slurmweb.json"
JOB_SAMPLES = (SAMPLE_V041, SAMPLE_V042, SAMPLE_V044)


def sample_json(name: str) -> dict[str, Any]:
    return json.loads(sample_text(name))


def workload_text(name: str) -> str:
    return (WORKLOADS / name).read_text(encoding="utf-8")


def workload_json(name: str) -> dict[str, Any]:
    return json.loads(workload_text(name))


def utc(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def shape(record) -> dict[str, list[int | None]]:
    """{node: [GPU index, ...]} of a workload, in the order the source gave them."""
    return {a.node: [g.index for g in a.gpus] for a in record.allocations}


def by_id(snapshot) -> dict[str, Any]:
    return {w.scheduler_id: w for w in snapshot.workloads}
