"""``scontrol show job -d`` text: multi-line records split by blank lines, or ``-o`` lines.

Pure: text in, a JobsSnapshot out. A record is ``Key=Value`` pairs; a key starts where a
space or line start is followed by a capitalised word (``CPUs/Task``, ``ReqB:S:C:T`` and
``JOB_GRES`` included) and ``=``, and everything up to the next key is the value (so
``JobName=my run`` keeps its space). With ``-d`` each allocated node group gets a detail
run: ``Nodes=gpu[01-02] CPU_IDs=0-31 Mem=0 GRES=gpu:h100:4(IDX:0-3)`` (older Slurm:
``GRES_IDX=gpu(IDX:0,2-3)``); in ``-o`` output the same keys sit inline. Slurm cuts long
CPU lists itself (``CPU_IDs=…,112,115-``): that is kept as written, not an error.

A capture cut short is refused (WorkloadFormatError, path ``jobs[i].<Key>``), never read as
a smaller job: a record without ``JobId``, ``JobState`` or ``NumNodes``; a last record
without a key every other one has (of those scontrol always prints) in a text that does
not end with a blank line; a GRES cut inside its parentheses or IDX list; a NodeList that
does not expand to NumNodes; detail nodes that are not the job's; or text ending inside a
key. A listing cut exactly between two records cannot be told from a shorter one. Times
are local, without a zone, so the caller names the cluster's zone (``tz``, UTC default).
"""

from __future__ import annotations

import re
from datetime import UTC, tzinfo

from clusters.parsers.slurm_common import clean, expand_hostlist
from workloads.parsers.slurm_gres import (
    MAX_JOB_NODES,
    gres_gpus,
    local_time,
    node_gpus,
    tres_gpus,
)
from workloads.records import (
    TERMINAL,
    GpuSlot,
    JobsSnapshot,
    NodeAllocation,
    WorkloadFormatError,
    WorkloadRecord,
    slurm_state,
)

FORMAT = "slurm-scontrol-jobs-text"

_KEY = re.compile(r"(?:(?<=\s)|^)([A-Z][A-Za-z0-9_/:]*)=")
_RECORD_START = re.compile(r"^[ \t]*JobId=", re.MULTILINE)
_DETAIL_KEYS = frozenset({"CPU_IDs", "Mem", "GRES", "GRES_IDX"})
_REQUIRED = ("JobId", "JobState", "NumNodes")
_EMPTY_MESSAGES = ("no jobs in the system",)
# Keys scontrol prints for every job (src/api/job_info.c, slurm_sprint_job_info) in 22.05
# and later; the rest (BatchHost, JOB_GRES, StdOut, TresPerNode, the detail lines ...)
# depend on the job, so a record may lack them and be whole.
_ALWAYS_PRINTED = frozenset(
    {
        "JobId", "JobName", "UserId", "GroupId", "Priority", "Account", "QOS", "JobState",
        "Reason", "Dependency", "Requeue", "Restarts", "BatchFlag", "ExitCode", "RunTime",
        "TimeLimit", "SubmitTime", "EligibleTime", "StartTime", "EndTime", "Deadline",
        "Partition", "ReqNodeList", "ExcNodeList", "NodeList", "NumNodes", "NumCPUs",
        "NumTasks", "TRES", "MinCPUsNode", "MinMemoryNode", "MinTmpDiskNode", "Features",
        "OverSubscribe", "Contiguous", "Licenses", "Network", "Command", "WorkDir", "Power",
    }
)  # fmt: skip
_NUMBER = re.compile(r"^\d+$")
_NUM_NODES = re.compile(r"^(\d+)(?:-(\d+))?$")
_USER = re.compile(r"^([^()\s]*)(?:\((\d+)\))?$")


def looks_like(text: str) -> bool:
    """True when the text starts like ``scontrol show job`` output."""
    stripped = text.lstrip()
    return stripped.startswith("JobId=") or stripped.lower().startswith(_EMPTY_MESSAGES)


def fields_of(record: str) -> list[tuple[str, str]]:
    """The record's ``(key, value)`` pairs in order (a key may come again: ``Nodes=``)."""
    matches = list(_KEY.finditer(record))
    pairs = []
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(record)
        pairs.append((match.group(1), record[match.end() : end].strip()))
    return pairs


def split_records(text: str) -> list[str]:
    """One string per job: each record starts at a line beginning ``JobId=``."""
    starts = [m.start() for m in _RECORD_START.finditer(text)]
    if not starts:
        return []
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]


def _node_count(value: str, path: str) -> int:
    match = _NUM_NODES.match(value)
    if not match:
        raise WorkloadFormatError("NumNodes is not a number or a range", path)
    return int(match.group(1))


def _expand(hostlist: str, path: str) -> list[str]:
    names = expand_hostlist(hostlist) if hostlist else []
    if any("[" in n or "]" in n for n in names):
        raise WorkloadFormatError("a node list is not a Slurm hostlist (cut?)", path)
    if len(names) > MAX_JOB_NODES or len(set(names)) != len(names):
        raise WorkloadFormatError("a node list repeats a node or is too long", path)
    return names


def _scheduler_id(top: dict[str, str], path: str) -> str:
    job_id = top["JobId"]
    if not _NUMBER.match(job_id):
        raise WorkloadFormatError("JobId is not a number", f"{path}.JobId")
    array_job = top.get("ArrayJobId", "")
    array_task = top.get("ArrayTaskId", "").split("%", 1)[0]  # the throttle may change
    if array_job and array_job != "0":
        if not _NUMBER.match(array_job):
            raise WorkloadFormatError("ArrayJobId is not a number", f"{path}.ArrayJobId")
        if _NUMBER.match(array_task):
            return f"{array_job}_{array_task}"
        if array_task:  # a pending array record not split yet: 5679_[1-10]
            return f"{array_job}_[{array_task}]"
    het_job = top.get("HetJobId", "")
    if het_job and het_job != "0":
        offset = top.get("HetJobOffset", "0")
        if not _NUMBER.match(het_job) or not _NUMBER.match(offset):
            raise WorkloadFormatError("HetJobId/HetJobOffset is not a number", f"{path}.HetJobId")
        return f"{het_job}+{offset}"
    return job_id


def _details(
    pairs: list[tuple[str, str]], path: str
) -> tuple[dict[str, str], list[tuple[list[str], int, tuple[GpuSlot, ...], str | None]]]:
    """The record's top-level fields, and its per-node detail groups: (nodes, GPU count,
    GPU slots, CPU_IDs) for each ``Nodes=`` run."""
    top: dict[str, str] = {}
    groups = []
    i = 0
    while i < len(pairs):
        key, value = pairs[i]
        if key != "Nodes":
            top.setdefault(key, value)
            i += 1
            continue
        nodes = _expand(value, f"{path}.Nodes")
        group: dict[str, str] = {}
        i += 1
        while i < len(pairs) and pairs[i][0] in _DETAIL_KEYS:
            group.setdefault(pairs[i][0], pairs[i][1])
            i += 1
        gres = group.get("GRES") or group.get("GRES_IDX")
        where = f"{path}.GRES" if "GRES" in group else f"{path}.GRES_IDX"
        count, slots = node_gpus(gres, where)
        groups.append((nodes, count, slots, clean(group.get("CPU_IDs"))))
    return top, groups


def parse_record(record: str, path: str, tz: tzinfo) -> WorkloadRecord:
    """One job record (multi-line or one line) as a WorkloadRecord."""
    top, groups = _details(fields_of(record), path)
    for key in _REQUIRED:
        if key not in top:
            raise WorkloadFormatError(
                f"the record ends before {key}: a capture cut short", f"{path}.{key}"
            )
    state = slurm_state(top["JobState"])
    node_count = _node_count(top["NumNodes"], f"{path}.NumNodes")
    nodes = _expand(clean(top.get("NodeList")) or "", f"{path}.NodeList")
    if nodes and len(nodes) != node_count and "COMPLETING" not in top["JobState"].upper():
        raise WorkloadFormatError(
            f"NumNodes says {node_count} but NodeList names {len(nodes)}: cut or broken",
            f"{path}.NodeList",
        )
    by_node: dict[str, NodeAllocation] = {}
    for group_nodes, count, slots, cpus in groups:
        for node in group_nodes:
            if node in by_node or (nodes and node not in nodes):
                raise WorkloadFormatError(
                    "a detail line names a node twice or one the job does not hold",
                    f"{path}.Nodes",
                )
            by_node[node] = NodeAllocation(node=node, gpu_count=count, gpus=slots, cpus=cpus)
    allocations = tuple(by_node.get(n) or NodeAllocation(node=n) for n in nodes)
    if not nodes:
        allocations = tuple(by_node.values())
    detail_total = sum(a.gpu_count for a in allocations) if groups else None
    per_node = gres_gpus(clean(top.get("TresPerNode")))
    gpu_count = tres_gpus(clean(top.get("TRES")))
    for candidate in (
        gres_gpus(clean(top.get("JOB_GRES"))),
        detail_total if detail_total else None,
        gres_gpus(clean(top.get("TresPerJob"))),
        per_node * (len(nodes) or node_count) if per_node is not None else None,
    ):
        if gpu_count is None:
            gpu_count = candidate
    started = local_time(top.get("StartTime"), tz, f"{path}.StartTime")
    ended = local_time(top.get("EndTime"), tz, f"{path}.EndTime")
    if state == "pending":  # estimates
        started = ended = None
    elif state not in TERMINAL:  # a running job's EndTime is its time limit
        ended = None
    user_match = _USER.match(top.get("UserId", ""))
    requested = {
        k: v
        for k in ("TresPerNode", "TresPerJob", "TresPerTask", "TRES", "JOB_GRES")
        if (v := clean(top.get(k)))
    }
    return WorkloadRecord(
        kind="slurm_job",
        scheduler_id=_scheduler_id(top, path),
        state=state,
        raw_state=top["JobState"],
        name=clean(top.get("JobName")) or "",
        user=(user_match.group(1) if user_match else clean(top.get("UserId"))) or "",
        account=clean(top.get("Account")) or "",
        partition=clean(top.get("Partition")) or "",
        submitted_at=local_time(top.get("SubmitTime"), tz, f"{path}.SubmitTime"),
        started_at=started,
        ended_at=ended,
        node_count=len(nodes) or node_count,
        gpu_count=gpu_count or 0,
        gpus_per_node=per_node,
        requested=requested,
        allocations=allocations,
    )


def _cut_at_a_line_end(records: list[str]) -> str | None:
    """A key every other record has, of those scontrol always prints, that the last one
    lacks, when the text does not end as scontrol ends a record (a blank line): the
    capture was cut between two lines. None when it looks whole (or cannot be told)."""
    if len(records) < 2 or records[-1].rstrip(" \t").endswith("\n\n"):
        return None
    keys = [{key for key, _ in fields_of(record)} for record in records]
    common = set.intersection(*keys[:-1]) & _ALWAYS_PRINTED
    missing = common - keys[-1]
    first = [key for key in _REQUIRED if key in missing]  # the most telling one first
    ordered = first or sorted(missing)
    return ordered[0] if ordered else None


def parse_scontrol_jobs(text: str, *, tz: tzinfo = UTC) -> JobsSnapshot:
    """Every job of ``scontrol show job -d`` (either layout); ``complete`` (every job the
    controller holds). ``No jobs in the system`` is an empty listing."""
    stripped = text.strip()
    if stripped.lower().startswith(_EMPTY_MESSAGES):
        return JobsSnapshot(format=FORMAT, scheduler="slurm", workloads=())
    if not stripped.startswith("JobId="):
        raise WorkloadFormatError("the text does not start with JobId=: not scontrol show job")
    if not text.endswith("\n"):
        last = stripped.rsplit(None, 1)[-1]
        if "=" not in last:
            raise WorkloadFormatError(
                "the text ends inside a field name: a capture cut short",
                f"jobs[{len(split_records(text)) - 1}]",
            )
    records = split_records(text)
    missing = _cut_at_a_line_end(records)
    if missing:
        raise WorkloadFormatError(
            f"the last record ends before {missing}, which every other record has: "
            "a capture cut short",
            f"jobs[{len(records) - 1}].{missing}",
        )
    workloads = []
    for i, record in enumerate(records):
        path = f"jobs[{i}]"
        try:
            workloads.append(parse_record(record, path, tz))
        except WorkloadFormatError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError):
            raise WorkloadFormatError("a job record has a malformed value", path) from None
    return JobsSnapshot(format=FORMAT, scheduler="slurm", workloads=tuple(workloads))
