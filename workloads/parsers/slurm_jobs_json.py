"""slurmrestd ``/slurm/v0.0.38``…``v0.0.44`` ``/jobs`` and ``/job/{id}``, and ``squeue --json``.

Pure: a decoded JSON document in, a JobsSnapshot out. The schemas differ by vintage, so
every field is read in each spelling: 22.05's v0.0.38 (plain numbers, ``job_state`` a
string, ``array_task_id`` null), 23.02's v0.0.39 (numbers as ``{"set", "infinite",
"number"}``, ``job_state`` still a string) and v0.0.40+ (``job_state`` a list).

A job's GPUs on each node come from ``gres_detail``: one string per allocated node, in the
order of the job's ``nodes`` hostlist expanded. Clusters that do not account GPUs as TRES
have none in ``tres_alloc_str``, and the GPUs still come from ``gres_detail``. A listing whose
nodes, ``node_count`` and ``gres_detail`` disagree is cut or broken: WorkloadFormatError
with the path of the field, never a guess.
"""

from __future__ import annotations

import re
from typing import Any

from clusters.parsers.slurm_common import clean, expand_hostlist
from workloads.parsers.slurm_gres import (
    MAX_JOB_NODES,
    epoch,
    gres_gpus,
    node_gpus,
    tres_gpus,
)
from workloads.records import (
    TERMINAL,
    JobsSnapshot,
    NodeAllocation,
    WorkloadFormatError,
    WorkloadRecord,
    slurm_state,
)

FORMAT = "slurm-jobs-json"
_VERSION = re.compile(r"v0\.0\.\d+")


def looks_like(document: dict[str, Any]) -> bool:
    """True for a slurmctld jobs document (``/jobs``, ``/job/{id}``, ``squeue --json``):
    a ``jobs`` list whose records carry ``job_state`` (accounting records carry ``state``)."""
    jobs = document.get("jobs")
    if not isinstance(jobs, list):
        return False
    first = next((j for j in jobs if isinstance(j, dict)), None)
    if first is None:
        return True
    return "job_state" in first or "gres_detail" in first


def number(value: object, path: str) -> int | None:
    """A plain number or a ``{set, infinite, number}`` object; unset/infinite/null is None.
    Negative numbers, booleans, strings and other types are a broken listing."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        value = value.get("number")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WorkloadFormatError("a number is expected here", path)
    if value != value or value < 0:  # NaN, negative
        raise WorkloadFormatError("a number here must not be negative", path)
    if isinstance(value, float):
        if value > 2**63:
            raise WorkloadFormatError("a number here is out of range", path)
        value = int(value)
    return value


def text(value: object, path: str) -> str:
    """A string field; null and Slurm's ``(null)`` are empty; other types are broken."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise WorkloadFormatError("a string is expected here", path)
    return clean(value) or ""


def meta_version(document: dict[str, Any]) -> str | None:
    """The Slurm release (``22.05.8``), else the data parser (``v0.0.41``), from ``meta``."""
    meta = document.get("meta")
    if not isinstance(meta, dict):
        return None
    slurm = meta.get("slurm") or meta.get("Slurm")
    if isinstance(slurm, dict) and isinstance(slurm.get("release"), str):
        return slurm["release"]
    plugin = meta.get("plugin")
    if isinstance(plugin, dict):
        for key in ("data_parser", "type"):
            match = _VERSION.search(str(plugin.get(key) or ""))
            if match:
                return match.group(0)
    return None


def check_errors(document: dict[str, Any]) -> None:
    """Slurm's own ``errors`` list, when non-empty, makes the listing unusable."""
    errors = document.get("errors")
    if errors is None:
        return
    if not isinstance(errors, list):
        raise WorkloadFormatError("errors is not a list", "errors")
    if errors:
        raise WorkloadFormatError(
            f"Slurm answered with {len(errors)} error(s) instead of a whole listing", "errors"
        )


def state_of(value: object, path: str) -> tuple[str, str]:
    """(our state, Slurm's own words) from ``"RUNNING"`` or ``["RUNNING", "COMPLETING"]``."""
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise WorkloadFormatError("a job state list holds a non-string", path)
        return slurm_state(value), "+".join(value)
    if isinstance(value, str):
        return slurm_state(value), value
    raise WorkloadFormatError("a job state is missing or not a string", path)


def scheduler_id(
    job_id: int,
    array_job: int | None,
    array_task: int | None,
    array_tasks: str,
    het_job: int | None,
    het_offset: int | None,
) -> str:
    """The contract's id: ``5679``, ``5679_12`` (array task), ``5679_[1-10]`` (a pending
    array record not yet split; Slurm's ``%4`` throttle left out, as it may change),
    ``5680+1`` (heterogeneous component)."""
    array_tasks = array_tasks.split("%", 1)[0]
    if array_job:
        if array_task is not None:
            return f"{array_job}_{array_task}"
        if array_tasks:
            return f"{array_job}_[{array_tasks}]"
    if het_job:
        return f"{het_job}+{het_offset or 0}"
    return str(job_id)


def expand_nodes(hostlist: str, path: str) -> list[str]:
    """The job's nodes in Slurm's order; a malformed or impossible hostlist is broken."""
    if not hostlist:
        return []
    names = expand_hostlist(hostlist)
    if any("[" in n or "]" in n for n in names):
        raise WorkloadFormatError("a node list is not a Slurm hostlist", path)
    if len(names) > MAX_JOB_NODES or len(set(names)) != len(names):
        raise WorkloadFormatError("a node list repeats a node or is too long", path)
    return names


def allocations_of(
    nodes: list[str], details: list[str], path: str
) -> tuple[tuple[NodeAllocation, ...], int | None]:
    """One NodeAllocation per node with its GPUs from the matching ``gres_detail`` entry;
    the GPU total, or None when there is no gres_detail at all."""
    if not details:
        return tuple(NodeAllocation(node=n) for n in nodes), None
    if len(details) != len(nodes):
        raise WorkloadFormatError(
            f"gres_detail has {len(details)} entries for {len(nodes)} nodes: cut or broken",
            f"{path}.gres_detail",
        )
    allocations = []
    total = 0
    for i, (node, detail) in enumerate(zip(nodes, details, strict=True)):
        count, slots = node_gpus(detail, f"{path}.gres_detail[{i}]")
        allocations.append(NodeAllocation(node=node, gpu_count=count, gpus=slots))
        total += count
    return tuple(allocations), total


def _requested(job: dict[str, Any], path: str) -> dict[str, Any]:
    keys = ("tres_per_node", "tres_per_job", "tres_per_task", "tres_req_str", "tres_alloc_str")
    return {k: v for k in keys if (v := text(job.get(k), f"{path}.{k}"))}


def parse_job(job: object, path: str) -> WorkloadRecord:
    """One slurmctld job record as a WorkloadRecord (see the module docstring)."""
    if not isinstance(job, dict):
        raise WorkloadFormatError("a job is not an object", path)
    job_id = number(job.get("job_id"), f"{path}.job_id")
    if job_id is None:
        raise WorkloadFormatError("a job has no job_id", f"{path}.job_id")
    state, raw_state = state_of(job.get("job_state"), f"{path}.job_state")
    details = job.get("gres_detail") or []
    if not isinstance(details, list) or not all(isinstance(d, str) for d in details):
        raise WorkloadFormatError("gres_detail is not a list of strings", f"{path}.gres_detail")
    nodes = expand_nodes(text(job.get("nodes"), f"{path}.nodes"), f"{path}.nodes")
    node_count = number(job.get("node_count"), f"{path}.node_count")
    # A completing job gives nodes back one by one, so its count may lag its list.
    completing = "COMPLETING" in raw_state.upper()
    if nodes and node_count is not None and node_count != len(nodes) and not completing:
        raise WorkloadFormatError(
            f"node_count says {node_count} but nodes names {len(nodes)}: cut or broken",
            f"{path}.node_count",
        )
    allocations, detail_total = allocations_of(nodes, details, path)
    requested = _requested(job, path)
    per_node = gres_gpus(requested.get("tres_per_node"))
    gpu_count = tres_gpus(requested.get("tres_alloc_str"))
    if gpu_count is None:
        gpu_count = detail_total
    # Otherwise what it asked for: a pending job, or an ended one whose GPUs are released
    # (22.05 clears gres_detail at the end; the request still says what it held).
    if gpu_count is None:
        gpu_count = tres_gpus(requested.get("tres_req_str"))
        if gpu_count is None:
            gpu_count = gres_gpus(requested.get("tres_per_job"))
        if gpu_count is None and per_node is not None and (nodes or node_count):
            gpu_count = per_node * (len(nodes) or node_count or 0)
    started = epoch(number(job.get("start_time"), f"{path}.start_time"), f"{path}.start_time")
    ended = epoch(number(job.get("end_time"), f"{path}.end_time"), f"{path}.end_time")
    if state == "pending":  # Slurm's start and end of a pending job are estimates
        started = ended = None
    elif state not in TERMINAL:  # a running job's end_time is its time limit
        ended = None
    array_job = number(job.get("array_job_id"), f"{path}.array_job_id")
    array_task = number(job.get("array_task_id"), f"{path}.array_task_id")
    het_job = number(job.get("het_job_id"), f"{path}.het_job_id")
    het_offset = number(job.get("het_job_offset"), f"{path}.het_job_offset")
    return WorkloadRecord(
        kind="slurm_job",
        scheduler_id=scheduler_id(
            job_id,
            array_job,
            array_task,
            text(job.get("array_task_string"), f"{path}.array_task_string"),
            het_job,
            het_offset,
        ),
        state=state,
        raw_state=raw_state,
        name=text(job.get("name"), f"{path}.name"),
        user=text(job.get("user_name"), f"{path}.user_name"),
        account=text(job.get("account"), f"{path}.account"),
        partition=text(job.get("partition"), f"{path}.partition"),
        submitted_at=epoch(
            number(job.get("submit_time"), f"{path}.submit_time"), f"{path}.submit_time"
        ),
        started_at=started,
        ended_at=ended,
        node_count=len(nodes) or node_count or 0,
        gpu_count=gpu_count or 0,
        gpus_per_node=per_node,
        requested=requested,
        allocations=allocations,
    )


def parse_jobs_json(document: dict[str, Any], *, complete: bool = True) -> JobsSnapshot:
    """Every job of a slurmctld jobs document. ``complete`` is False for ``/job/{id}`` (one
    job; the others are not ended by its silence); ``/jobs`` and ``squeue --json`` are whole.

    Raises WorkloadFormatError (with the path, e.g. ``jobs[3].gres_detail[1]``) for
    Slurm's own ``errors``, a record of the wrong shape, or a listing cut short.
    """
    check_errors(document)
    jobs = document.get("jobs")
    if not isinstance(jobs, list):
        raise WorkloadFormatError("jobs is not a list", "jobs")
    workloads = tuple(_guarded(job, f"jobs[{i}]") for i, job in enumerate(jobs))
    return JobsSnapshot(
        format=FORMAT,
        scheduler="slurm",
        workloads=workloads,
        complete=complete,
        source_version=meta_version(document),
    )


def _guarded(job: object, path: str) -> WorkloadRecord:
    """parse_job with any slip on a malformed value turned into a WorkloadFormatError."""
    try:
        return parse_job(job, path)
    except WorkloadFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError):
        raise WorkloadFormatError("a job record has a malformed value", path) from None
