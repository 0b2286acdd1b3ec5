"""Pieces every Slurm job format shares: per-node GRES with IDX, TRES GPU counts, times.

Pure (no Django, no I/O). A job's GPUs on one node are spelled the same way in slurmrestd's
``gres_detail`` and in ``scontrol show job -d``'s ``GRES=`` (``gpu:h100:4(IDX:0-3)``, two
types in one string, ``gpu:1(IDX:3)``) or the older ``GRES_IDX=gpu(IDX:0,2-3)``, so they
are read here once, on clusters' GRES and hostlist helpers. Every malformed value raises
WorkloadFormatError with the caller's path; nothing here echoes the input.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, tzinfo

from clusters.parsers.slurm_common import (
    is_null,
    mig_profile_of,
    parse_gres,
    split_top_level,
    tres_counts,
)
from workloads.records import GpuSlot, WorkloadFormatError

# The most GPU indices one node may have: an index beyond is a broken capture, not a GPU.
MAX_GPU_INDEX = 4096
# A job spread over more nodes than any cluster has is a broken listing.
MAX_JOB_NODES = 100_000
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
# Epoch seconds Slurm may print: up to the year 9999 (bigger values are not times).
_MAX_EPOCH = 253_402_300_799


def parse_indices(text: str, path: str) -> list[int]:
    """``0-3,5`` -> [0, 1, 2, 3, 5]; ``N/A``/empty -> []. Every index in 0..MAX_GPU_INDEX,
    ranges well formed, none twice: otherwise the capture is broken."""
    if is_null(text):
        return []
    indices: list[int] = []
    for part in text.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise WorkloadFormatError("a GPU index list is not numbers and ranges", path)
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high > MAX_GPU_INDEX or low > high:
            raise WorkloadFormatError(
                f"a GPU index is beyond {MAX_GPU_INDEX} or a range runs backwards", path
            )
        indices.extend(range(low, high + 1))
    if len(set(indices)) != len(indices):
        raise WorkloadFormatError("a GPU index is given twice on one node", path)
    return indices


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def node_gpus(gres: str | None, path: str) -> tuple[int, tuple[GpuSlot, ...]]:
    """(GPU count, the GPUs one by one) that one node's job GRES string names.

    ``gpu:h100:1(IDX:0),gpu:h200:1(IDX:2)`` -> 2 GPUs of two types; ``gpu:1(IDX:3)`` -> one
    untyped; ``gpu(IDX:0,2-3)`` (the older ``GRES_IDX=`` spelling, no count) -> 3. Other GRES
    (``shard``, ``mps``) are not GPUs held and are skipped. A count without IDX gives the
    count and no slots (nothing is invented).
    """
    if is_null(gres):
        return 0, ()
    text = str(gres).strip()
    if not _balanced(text):
        raise WorkloadFormatError("a GRES string is cut (unbalanced parentheses)", path)
    count = 0
    slots: list[GpuSlot] = []
    seen: set[int] = set()
    for entry in split_top_level(text):
        name = entry.split("(", 1)[0].split(":", 1)[0].strip()
        if name != "gpu":
            continue
        paren = entry.find("(")
        extra = entry[paren + 1 : entry.rfind(")")] if paren != -1 else ""
        at = extra.upper().find("IDX:")
        index_text = extra[at + 4 :] if at != -1 else None
        indices = parse_indices(index_text, path) if index_text is not None else []
        head = entry[:paren] if paren != -1 else entry
        fields = [f.strip() for f in head.split(":")]
        records = parse_gres(head if len(fields) > 1 else f"{head}:{len(indices) or 1}")
        gpu_type = records[0].type if records else None
        entry_count = records[0].count if records and len(fields) > 1 else len(indices)
        if entry_count < 0 or entry_count > MAX_GPU_INDEX + 1:
            raise WorkloadFormatError("a GPU count is out of range", path)
        if seen.intersection(indices):
            raise WorkloadFormatError("a GPU index is given twice on one node", path)
        seen.update(indices)
        count += entry_count
        profile = mig_profile_of(gpu_type)
        slots.extend(GpuSlot(index=i, gpu_type=gpu_type, mig_profile=profile) for i in indices)
    return count, tuple(slots)


def gres_gpus(text: object) -> int | None:
    """GPUs in a TRES-per-node/job request or a job GRES total: ``gres/gpu:4``,
    ``gres:gpu:h100:8`` (22.05), ``gres/gpu:h100:1,gres/gpu:h200:1`` (2), ``gpu:h100:16``;
    None when it names no GPU."""
    if is_null(text):
        return None
    total = None
    for entry in split_top_level(str(text)):
        entry = entry.strip()
        for prefix in ("gres/", "gres:"):
            if entry.startswith(prefix):
                entry = entry[len(prefix) :]
        for record in parse_gres(entry):
            if record.name == "gpu":
                total = (total or 0) + record.count
    return total


def tres_gpus(text: object) -> int | None:
    """GPUs in a TRES string (``cpu=8,gres/gpu=4,gres/gpu:h100=4`` -> 4: the untyped total,
    else the typed sum); None when the TRES carry no GPU (clusters that do not account
    GPUs as TRES)."""
    counts = tres_counts(text)
    if ("gpu", None) in counts:
        return counts[("gpu", None)]
    typed = [v for (name, gres_type), v in counts.items() if name == "gpu" and gres_type]
    return sum(typed) if typed else None


def epoch(value: int | None, path: str) -> datetime | None:
    """Slurm's epoch seconds (UTC) as an aware datetime; 0 or unset is None."""
    if value is None or value == 0:
        return None
    if value < 0 or value > _MAX_EPOCH:
        raise WorkloadFormatError("a time is outside any date", path)
    return datetime.fromtimestamp(value, tz=UTC)


def local_time(text: str | None, tz: tzinfo, path: str) -> datetime | None:
    """``2026-12-02T05:52:04`` (scontrol's local time, no zone) in ``tz``; ``Unknown``,
    ``None``, ``N/A`` and empty are None."""
    if text is None or text.strip().lower() in ("", "unknown", "none", "n/a", "(null)"):
        return None
    try:
        parsed = datetime.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        raise WorkloadFormatError("a time is not YYYY-MM-DDTHH:MM:SS", path) from None
    return parsed.replace(tzinfo=tz)
