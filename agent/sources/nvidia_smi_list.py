"""Parse `nvidia-smi -L` (the GPU list): index, model and UUID of each GPU, and its MIG devices.

The commonest thing people paste, and the least: no PCI bus ids, memory, serials, health,
versions or links. A report from it is always partial (`SmiLog.partial_reason`), so the
backend never takes a GPU or MIG device it does not list as gone.

Two spellings of a MIG device line exist:

- current drivers: `  MIG 3g.40gb     Device  0: (UUID: MIG-7089d0f3-...)`, a UUID of its own
  and no GPU/compute instance ids;
- R450 (the first MIG drivers): `  MIG 3g.20gb Device 0: (UUID: MIG-GPU-<gpu uuid>/2/0)`, whose
  UUID names the GPU and the GPU and compute instance ids (here 2 and 0).

Drivers before 418 printed `GPU 0: Tesla K80 (GPU-...)`, without "UUID: ". Profile names go
through `agent.mig` like every other source's. A line that is not one of these (a line cut
short, a shell prompt pasted with the output) is left out with a warning, never guessed at.
"""

from __future__ import annotations

import re
from typing import Any

from ..mig import mig_profile_name
from .identify import LIST, wrong_output
from .smi_types import SmiLog, SmiParseError
from .text import TextDecodeError, decode_text
from .values import real_uuid

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_GPU_LINE = re.compile(rf"^GPU (?P<index>\d+): (?P<name>.*?) \((?:UUID: )?(?P<uuid>GPU-{_UUID})\)$")
_MIG_LINE = re.compile(
    r"^(?P<profile>MIG \S+)\s+Device\s+(?P<device>\d+): \(UUID: "
    rf"(?P<uuid>MIG-(?:GPU-(?P<gpu>{_UUID})/(?P<gi>\d+)/(?P<ci>\d+)|{_UUID}))\)$"
)
MAX_GPU_INDEX = 63  # the schema's bound

PARTIAL_REASON = (
    "built from `nvidia-smi -L`, which lists GPU models and UUIDs and MIG devices only: no PCI "
    "bus ids, memory, serials, health, versions or links"
)


def parse_nvidia_smi_list(data: str | bytes) -> SmiLog:
    """Parse a saved `nvidia-smi -L`. Raises SmiParseError when no GPU line is found.

    The result's GPUs carry `index`, `name`, `uuid`, and where MIG devices are listed
    `mig_mode_current` true and `mig_devices` (`uuid`, `profile`, and the instance ids where
    the R450 form gives them, else None); every other field is unknown, not false. A GPU
    without MIG lines may still have MIG on (no instances made yet): its mode stays unknown.
    """
    try:
        text = decode_text(data)
    except TextDecodeError as exc:
        raise SmiParseError(str(exc)) from None
    reason = wrong_output(text, (LIST,))
    if reason:
        raise SmiParseError(reason)
    log = SmiLog(partial_reason=PARTIAL_REASON)
    gpu: dict[str, Any] | None = None
    seen: set[int] = set()
    ignored: list[int] = []
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line:
            continue
        gpu_match = _GPU_LINE.match(line)
        if gpu_match:
            index = int(gpu_match["index"])
            uuid = real_uuid(gpu_match["uuid"])
            if index > MAX_GPU_INDEX or index in seen or uuid is None:
                gpu = None
                ignored.append(number)
                continue
            seen.add(index)
            gpu = {"index": index, "name": gpu_match["name"].strip() or None, "uuid": uuid}
            log.gpus.append(gpu)
            continue
        mig_match = _MIG_LINE.match(line)
        if mig_match and gpu is not None and _belongs(mig_match, gpu):
            gpu["mig_mode_current"] = True
            gpu.setdefault("mig_devices", []).append(_mig_device(mig_match))
            continue
        ignored.append(number)
    if not log.gpus:
        raise SmiParseError("no `GPU <n>: <model> (UUID: GPU-...)` line found")
    for gpu in log.gpus:
        devices = gpu.get("mig_devices", [])
        if all(d["gpu_instance_id"] is not None for d in devices):  # R450: by instance
            devices.sort(key=lambda d: (d["gpu_instance_id"], d["compute_instance_id"]))
    if ignored:
        shown = ", ".join(map(str, ignored[:5])) + (" ..." if len(ignored) > 5 else "")
        log.warnings.append(
            f"nvidia-smi -L: line {shown} is not a GPU or MIG device line (cut short, or "
            "something else pasted with the output): left out"
        )
    return log


def _belongs(match: re.Match[str], gpu: dict[str, Any]) -> bool:
    """An R450 MIG UUID names its GPU: one under another GPU's line is not trusted."""
    return match["gpu"] is None or f"GPU-{match['gpu']}".lower() == str(gpu["uuid"]).lower()


def _mig_device(match: re.Match[str]) -> dict[str, Any]:
    gi, ci = match["gi"], match["ci"]
    return {
        "uuid": match["uuid"],
        "gpu_instance_id": int(gi) if gi is not None else None,
        "compute_instance_id": int(ci) if ci is not None else None,
        "profile": mig_profile_name(match["profile"]),
        "memory_bytes": None,
        "sm_count": None,
        "placement_start": None,
        "placement_size": None,
    }
