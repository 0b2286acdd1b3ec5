"""Saved `nvidia-smi --query-compute-apps=... --format=csv` output: what ran on each GPU.

For servers where the agent cannot ask NVML itself, a person (or a cron job) saves
`nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv`; the
columns and their order are theirs to choose. The header names them (`used_gpu_memory
[MiB]` is nvidia-smi's name for `used_memory`, with its unit); `--format=csv,noheader` has
none, so the columns are then given (`columns=`), or taken as the documented
`gpu_uuid,pid,process_name,used_memory` when a row has four. `nounits` drops the unit from
the values (MiB, the header's unit, is then assumed). `[N/A]` and the other placeholders are
null; masked all-zero UUIDs are no UUID (such a row attaches by bus id).

Parsing is pure (text in, rows out); `attach_compute_apps` puts the rows on a report's GPUs
and MIG devices by UUID, else by PCI bus id, with each pid's workload read from a proc root
when the file describes this machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..processes import MAX_PROCESSES, process_entry
from ..schema import normalize_pci_bus_id
from .smi_types import SmiParseError
from .text import TextDecodeError, decode_text
from .values import clean, real_uuid, to_bytes, to_int

# nvidia-smi's query names and the header names it prints for them
_ALIASES = {
    "gpu_uuid": "gpu_uuid",
    "uuid": "gpu_uuid",
    "gpu_bus_id": "gpu_bus_id",
    "pci.bus_id": "gpu_bus_id",
    "gpu_name": "gpu_name",
    "gpu_serial": "gpu_serial",
    "pid": "pid",
    "process_name": "process_name",
    "name": "process_name",
    "used_memory": "used_memory",
    "used_gpu_memory": "used_memory",
    "timestamp": "timestamp",
}
DEFAULT_COLUMNS = ("gpu_uuid", "pid", "process_name", "used_memory")
_UNIT = re.compile(r"^(?P<name>[^\[]+?)\s*\[(?P<unit>[^\]]+)\]\s*$")


@dataclass(frozen=True)
class ComputeApp:
    """One row: a process on a GPU (or MIG device), as nvidia-smi printed it."""

    pid: int
    gpu_uuid: str | None
    gpu_bus_id: str | None
    process_name: str | None
    used_memory_bytes: int | None


@dataclass
class ComputeApps:
    rows: list[ComputeApp] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _column(name: str) -> tuple[str | None, str | None]:
    """A header cell -> (the query name, its unit), `(None, None)` for one not known."""
    unit = None
    match = _UNIT.match(name)
    if match:
        name, unit = match["name"], match["unit"]
    return _ALIASES.get(name.strip().lower()), unit


def _is_header(cells: list[str]) -> bool:
    """A header names a query column and holds no integer (a data row's pid is one)."""
    named = any(_column(cell)[0] is not None for cell in cells)
    return named and not any(cell.strip().isdigit() for cell in cells)


def parse_compute_apps(
    data: str | bytes, *, columns: tuple[str, ...] | list[str] | None = None
) -> ComputeApps:
    """The rows of a saved `--query-compute-apps` CSV. Raises SmiParseError for a file that
    is not one (no pid column, rows that do not fit the columns)."""
    try:
        text = decode_text(data)
    except TextDecodeError as exc:
        raise SmiParseError(str(exc)) from None
    lines = [line for line in text.splitlines() if line.strip()]
    out = ComputeApps()
    if not lines:
        return out  # nothing ran: nvidia-smi prints no line at all with noheader
    first = [cell.strip() for cell in lines[0].split(",")]
    units: list[str | None]
    header = _is_header(first)
    if header:
        parsed = [_column(cell) for cell in first]
        names: list[str | None] = [name for name, _ in parsed]
        units = [unit for _, unit in parsed]
        lines = lines[1:]
    elif columns:
        names = [_ALIASES.get(c.strip().lower()) for c in columns]
        units = [None] * len(names)
        if None in names:
            raise SmiParseError(f"unknown column in {','.join(columns)}")
    elif len(first) == len(DEFAULT_COLUMNS):
        names, units = list(DEFAULT_COLUMNS), [None] * len(DEFAULT_COLUMNS)
    else:
        raise SmiParseError(
            f"no header and {len(first)} columns: give the query's columns "
            f"(--compute-apps-columns {','.join(DEFAULT_COLUMNS)})"
        )
    if "pid" not in names:
        raise SmiParseError("not --query-compute-apps output: no pid column")
    if "gpu_uuid" not in names and "gpu_bus_id" not in names:
        raise SmiParseError("no gpu_uuid or gpu_bus_id column: rows name no GPU")
    for number, line in enumerate(lines, start=2 if header else 1):
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) > len(names) and "process_name" in names:
            # a process name holding commas: the extra cells are part of it
            at = names.index("process_name")
            extra = len(cells) - len(names)
            cells[at : at + extra + 1] = [", ".join(cells[at : at + extra + 1])]
        if len(cells) != len(names):
            raise SmiParseError(f"line {number}: {len(cells)} values for {len(names)} columns")
        row = dict(zip(names, cells, strict=True))
        unit = dict(zip(names, units, strict=True)).get("used_memory") or "mib"
        pid = to_int(row.get("pid"))
        if pid is None or pid < 1:
            out.warnings.append(f"line {number}: no pid ({row.get('pid')!r}): left out")
            continue
        out.rows.append(
            ComputeApp(
                pid=pid,
                gpu_uuid=real_uuid(row.get("gpu_uuid")),
                gpu_bus_id=normalize_pci_bus_id(clean(row.get("gpu_bus_id"))),
                process_name=clean(row.get("process_name")),
                used_memory_bytes=to_bytes(row.get("used_memory"), unit.lower()),
            )
        )
    return out


def attach_compute_apps(
    report: dict[str, Any], apps: ComputeApps, *, proc_root: Path | None = None
) -> dict[str, Any]:
    """Put the rows on the report's GPUs and MIG devices: by UUID (a MIG UUID names the MIG
    device), else by the GPU's PCI bus id. The file lists every compute process of the
    machine at one moment, so a GPU it does not name ran none (`[]`). Each pid's workload is
    read below `proc_root` (None: the file came from another machine, workloads unknown).
    """
    targets: dict[str, dict[str, Any]] = {}
    by_bus: dict[str, dict[str, Any]] = {}
    for gpu in report.get("gpus", []):
        gpu["processes"] = []
        targets[gpu["uuid"].lower()] = gpu
        if gpu.get("pci_bus_id"):
            by_bus[gpu["pci_bus_id"]] = gpu
        for mig in gpu.get("mig_devices") or []:
            mig["processes"] = []
            targets[mig["uuid"].lower()] = mig
    unmatched: list[str] = []
    for row in apps.rows:
        target = targets.get((row.gpu_uuid or "").lower()) or by_bus.get(row.gpu_bus_id or "")
        if target is None:
            unmatched.append(str(row.pid))
            continue
        if len(target["processes"]) >= MAX_PROCESSES:
            continue
        entry = process_entry(row.pid, row.used_memory_bytes, proc_root, name=row.process_name)
        target["processes"] = [p for p in target["processes"] if p["pid"] != row.pid] + [entry]
    for gpu in report.get("gpus", []):
        gpu["processes"].sort(key=lambda p: p["pid"])
        for mig in gpu.get("mig_devices") or []:
            mig["processes"].sort(key=lambda p: p["pid"])
    warnings = list(report.get("warnings", [])) + apps.warnings
    if unmatched:
        warnings.append(
            f"compute apps: pid {', '.join(unmatched[:20])} ran on a GPU the report does not "
            "have (no matching UUID or bus id): left out"
        )
    report["warnings"] = warnings
    return report
