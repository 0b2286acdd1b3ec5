"""What runs on each GPU now: NVML's compute processes, each with its name and workload.

NVML knows pids and memory; `/proc/PID/comm` gives the name and `/proc/PID/cgroup` the
Slurm job or Kubernetes pod that started it (`agent.cgroup`). Both are read below a proc
root (`/proc`, or a fake tree in tests). A pid that is gone by the time it is read, or that
this agent may not read (another pid namespace, hidepid), keeps its NVML facts with
`name`/`workload` null: never an error, since processes come and go between two calls.

An NVML failure listing processes (NotSupported on some boards and vGPU, NoPermission, a GPU
in error) is a warning and `processes: null` on that GPU and its MIG devices: the rest of
the report stands.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .cgroup import workload_from_cgroup
from .nvml import ComputeProcess, NvmlBackend, NvmlError

# The schema's bounds: processes per GPU or MIG device, a name's length.
MAX_PROCESSES = 512
MAX_NAME = 256
MAX_CGROUP_BYTES = 64 * 1024  # a cgroup file is a few lines; never read a runaway one whole


def _read_text(path: Path, limit: int) -> str | None:
    try:
        with path.open("rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:  # gone, another namespace, hidepid: unknown, not an error
        return None


def process_name(pid: int, proc_root: Path) -> str | None:
    """The process's command name (`/proc/PID/comm`, at most 15 characters), or None."""
    text = _read_text(proc_root / str(pid) / "comm", 4096)
    name = text.strip() if text else ""
    return name[:MAX_NAME] or None


def process_workload(pid: int, proc_root: Path) -> dict[str, Any] | None:
    """The Slurm job or Kubernetes pod the process belongs to, or None."""
    text = _read_text(proc_root / str(pid) / "cgroup", MAX_CGROUP_BYTES)
    return workload_from_cgroup(text) if text else None


def process_entry(
    pid: int, used_memory_bytes: int | None, proc_root: Path | None, *, name: str | None = None
) -> dict[str, Any]:
    """One report item: NVML's pid and memory, the name (given, else /proc's) and workload.
    `proc_root` None: the pid is another machine's, its name and workload unknown here."""
    if name:
        name = name[:MAX_NAME]
    elif proc_root is not None:
        name = process_name(pid, proc_root)
    return {
        "pid": pid,
        "name": name or None,
        "used_memory_bytes": used_memory_bytes,
        "workload": process_workload(pid, proc_root) if proc_root is not None else None,
    }


def process_entries(processes: Iterable[ComputeProcess], proc_root: Path) -> list[dict[str, Any]]:
    """Report items for NVML's processes, by pid, within the schema's bound."""
    ordered = sorted(processes, key=lambda p: p.pid)[:MAX_PROCESSES]
    return [process_entry(p.pid, p.used_memory_bytes, proc_root) for p in ordered if p.pid > 0]


def attach_processes(
    backend: NvmlBackend,
    gpus: list[dict[str, Any]],
    handles: dict[int, Any],
    proc_root: Path,
) -> list[str]:
    """Fill `processes` on every GPU and MIG device of a live walk; the warnings it raised.

    A GPU without a usable handle (lost mid-walk) gets `processes: null` and no extra
    warning: its own error already says what happened.
    """
    warnings: list[str] = []
    for gpu in gpus:
        handle = handles.get(gpu["index"])
        migs = gpu.get("mig_devices") or []
        gpu["processes"] = None
        for mig in migs:
            mig["processes"] = None
        if handle is None or gpu.get("status") == "error":
            continue
        label = f"GPU {gpu['index']} ({gpu['uuid']})"
        try:
            gpu["processes"] = process_entries(backend.compute_processes(handle), proc_root)
            if migs:
                by_uuid = backend.mig_compute_processes(handle)
                for mig in migs:
                    mig["processes"] = process_entries(by_uuid.get(mig["uuid"], []), proc_root)
        except NvmlError as exc:
            gpu["processes"] = None
            for mig in migs:
                mig["processes"] = None
            warnings.append(f"{label}: compute processes unreadable: {exc.reason}")
    return warnings
