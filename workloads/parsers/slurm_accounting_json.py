"""Accounting: ``sacct --json`` and slurmdbd ``/slurmdb/v0.0.38``…``v0.0.44`` ``/jobs``
(and ``/job/{id}``).

Pure: a decoded JSON document in, a JobsSnapshot out. Accounting says what a job was given
in counts (``tres.allocated``: ``{"type": "gres", "name": "gpu", "count": 8}``), never which
GPUs, so every record is ``history_only`` with no GpuSlot at all, its nodes named with no
GPU count on them (a count per node would be a guess), and a job whose TRES carry no GPU
(a cluster that does not account ``gres/gpu``) has no GPUs. Steps (``steps``) are parts of
a job, not workloads, and are not read. A listing is never complete: accounting is history.
"""

from __future__ import annotations

from typing import Any

from workloads.parsers.slurm_gres import epoch
from workloads.parsers.slurm_jobs_json import (
    check_errors,
    expand_nodes,
    meta_version,
    number,
    scheduler_id,
    state_of,
    text,
)
from workloads.records import (
    TERMINAL,
    JobsSnapshot,
    NodeAllocation,
    WorkloadFormatError,
    WorkloadRecord,
)

FORMAT = "slurm-accounting-json"


def looks_like(document: dict[str, Any]) -> bool:
    """True for accounting jobs: records with a ``state`` object, or slurmdbd's plugin."""
    jobs = document.get("jobs")
    if not isinstance(jobs, list):
        return False
    first = next((j for j in jobs if isinstance(j, dict)), None)
    if first is not None:
        return isinstance(first.get("state"), dict) or isinstance(first.get("tres"), dict)
    meta = document.get("meta")
    plugin = meta.get("plugin") if isinstance(meta, dict) else None
    command = meta.get("command") if isinstance(meta, dict) else None
    kind = str(plugin.get("type") or "") if isinstance(plugin, dict) else ""
    return (
        "slurmdbd" in kind
        or "/db" in kind
        or (isinstance(command, list) and bool(command) and command[0] == "sacct")
    )


def tres_gpu_count(tres: object, path: str) -> int:
    """GPUs in an accounting TRES list: the untyped ``gres``/``gpu`` count, else the sum of
    the typed ones (``gpu:h100``); 0 when the list names no GPU."""
    if tres is None:
        return 0
    if not isinstance(tres, list):
        raise WorkloadFormatError("a TRES list is not a list", path)
    untyped = None
    typed = 0
    for i, item in enumerate(tres):
        if not isinstance(item, dict):
            raise WorkloadFormatError("a TRES entry is not an object", f"{path}[{i}]")
        if item.get("type") != "gres":
            continue
        name = str(item.get("name") or "")
        count = number(item.get("count"), f"{path}[{i}].count") or 0
        if name == "gpu":
            untyped = count
        elif name.startswith("gpu:"):
            typed += count
    return untyped if untyped is not None else typed


def _part(job: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    value = job.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WorkloadFormatError(f"{key} is not an object", f"{path}.{key}")
    return value


def parse_job(job: object, path: str) -> WorkloadRecord:
    """One accounting job record as a history-only WorkloadRecord."""
    if not isinstance(job, dict):
        raise WorkloadFormatError("a job is not an object", path)
    job_id = number(job.get("job_id"), f"{path}.job_id")
    if job_id is None:
        raise WorkloadFormatError("a job has no job_id", f"{path}.job_id")
    state_part = _part(job, "state", path)
    state, raw_state = state_of(state_part.get("current"), f"{path}.state.current")
    times = _part(job, "time", path)
    array = _part(job, "array", path)
    het = _part(job, "het", path)
    tres = _part(job, "tres", path)
    nodes = expand_nodes(text(job.get("nodes"), f"{path}.nodes"), f"{path}.nodes")
    if nodes == ["None assigned"]:
        nodes = []
    node_count = number(job.get("allocation_nodes"), f"{path}.allocation_nodes")
    allocated = tres_gpu_count(tres.get("allocated"), f"{path}.tres.allocated")
    requested_gpus = tres_gpu_count(tres.get("requested"), f"{path}.tres.requested")

    def when(key: str) -> Any:
        return epoch(number(times.get(key), f"{path}.time.{key}"), f"{path}.time.{key}")

    started, ended = when("start"), when("end")
    if state == "pending":
        started = ended = None
    elif state not in TERMINAL:
        ended = None
    association = _part(job, "association", path)
    user = text(job.get("user"), f"{path}.user") or text(
        association.get("user"), f"{path}.association.user"
    )
    return WorkloadRecord(
        kind="slurm_job",
        scheduler_id=scheduler_id(
            job_id,
            number(array.get("job_id"), f"{path}.array.job_id"),
            number(array.get("task_id"), f"{path}.array.task_id"),
            text(array.get("task"), f"{path}.array.task"),
            number(het.get("job_id"), f"{path}.het.job_id"),
            number(het.get("job_offset"), f"{path}.het.job_offset"),
        ),
        state=state,
        raw_state=raw_state,
        name=text(job.get("name"), f"{path}.name"),
        user=user,
        account=text(job.get("account"), f"{path}.account"),
        partition=text(job.get("partition"), f"{path}.partition"),
        submitted_at=when("submission"),
        started_at=started,
        ended_at=ended,
        node_count=len(nodes) or node_count or 0,
        gpu_count=allocated if nodes or allocated else requested_gpus,
        requested={"tres": {k: tres[k] for k in ("allocated", "requested") if k in tres}},
        allocations=tuple(NodeAllocation(node=n) for n in nodes),
        history_only=True,
    )


def parse_accounting_json(document: dict[str, Any]) -> JobsSnapshot:
    """Every job of an accounting document, as history (``complete=False``)."""
    check_errors(document)
    jobs = document.get("jobs")
    if not isinstance(jobs, list):
        raise WorkloadFormatError("jobs is not a list", "jobs")
    workloads = []
    for i, job in enumerate(jobs):
        path = f"jobs[{i}]"
        try:
            workloads.append(parse_job(job, path))
        except WorkloadFormatError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError):
            raise WorkloadFormatError("a job record has a malformed value", path) from None
    return JobsSnapshot(
        format=FORMAT,
        scheduler="slurm",
        workloads=tuple(workloads),
        complete=False,
        history=True,
        source_version=meta_version(document),
    )
