"""MIG profile names: one vocabulary for the agent and the backend (like `schema.py`).

A profile name is `<compute slices>g.<memory>gb` (`3g.40gb`); a compute instance smaller than
its GPU instance is `<ci slices>c.<gi profile>` (`1c.3g.40gb`); NVML may add a suffix
(`1g.10gb+me`) and a prefix (`MIG 1g.10gb`). Schedulers wrap the name in their own words
(`nvidia.com/mig-1g.10gb`, Slurm's `nvidia_a100_1g.5gb`, GFD's `...-MIG-1g.10gb`). This module
reads every spelling (`normalize_mig_profile`, `parse_mig_profile`, `mig_profile_name`), knows
the slices of each GPU family (`mig_slices`), and names the devices of sources that omit the
profile (`derive_mig_profile`: nvidia-smi -q and -q -x list MIG devices with instance ids, SM
count and memory, but no profile name and no UUID).

The slice count and the memory label are not plain arithmetic on what a file shows (an H100
3g.40gb has 60 SMs and 40448 MiB), so known GPU families are looked up in a table of NVIDIA's
published profiles; other GPUs get a name derived from the SM count per slice of their
architecture. No Django, no pynvml: the backend imports this module.
"""

from __future__ import annotations

import math
import re

PROFILE_RE = re.compile(r"(?:(?P<ci>\d+)c\.)?(?P<gi>(?P<g>\d+)g\.\d+gb)", re.IGNORECASE)
"""The shape of a profile name: optional compute slices, GPU instance slices and memory."""
_DEVICE_PROFILE_RE = re.compile(rf"{PROFILE_RE.pattern}(?P<suffix>\S*)", re.IGNORECASE)

# (profile, SMs, memory MiB as nvidia-smi shows a MIG device of that profile)
_A100_40GB = (
    ("1g.5gb", 14, 4864),
    ("1g.10gb", 14, 9856),
    ("2g.10gb", 28, 9856),
    ("3g.20gb", 42, 19968),
    ("4g.20gb", 56, 19968),
    ("7g.40gb", 98, 40192),
)
_A100_80GB = (
    ("1g.10gb", 14, 9728),
    ("1g.20gb", 14, 19968),
    ("2g.20gb", 28, 19968),
    ("3g.40gb", 42, 40192),
    ("4g.40gb", 56, 40192),
    ("7g.80gb", 98, 80896),
)
_A30 = (
    ("1g.6gb", 14, 5952),
    ("2g.12gb", 28, 11968),
    ("4g.24gb", 56, 24064),
)
_H100_80GB = (
    ("1g.10gb", 16, 9984),
    ("1g.20gb", 26, 20096),
    ("2g.20gb", 32, 20096),
    ("3g.40gb", 60, 40448),
    ("4g.40gb", 64, 40448),
    ("7g.80gb", 132, 80896),
)
_H100_94GB = (
    ("1g.12gb", 16, 11776),
    ("1g.24gb", 26, 23808),
    ("2g.24gb", 32, 23808),
    ("3g.47gb", 60, 47488),
    ("4g.47gb", 64, 47488),
    ("7g.94gb", 132, 95232),
)
_H200 = (
    ("1g.18gb", 16, 16896),
    ("1g.35gb", 26, 33280),
    ("2g.35gb", 32, 33280),
    ("3g.71gb", 60, 67328),
    ("4g.71gb", 64, 67328),
    ("7g.141gb", 132, 134656),
)
# SMs in one compute slice, for GPUs the table does not know.
_SMS_PER_SLICE = {"ampere": 14, "hopper": 16, "blackwell": 16}
_TOLERANCE = 0.15


def _family(gpu_name: str) -> tuple[tuple[str, int, int], ...] | None:
    name = gpu_name.upper()
    if "H200" in name:
        return _H200
    if "H100" in name or "H800" in name:
        return _H100_94GB if ("NVL" in name or "94GB" in name) else _H100_80GB
    if "A100" in name or "A800" in name:
        return _A100_80GB if "80GB" in name else _A100_40GB
    if "A30" in name:
        return _A30
    return None


def derive_mig_profile(
    gpu_name: str | None,
    architecture: str | None,
    memory_mib: int | None,
    sm_count: int | None,
    gpu_instance_sm_count: int | None = None,
) -> str | None:
    """The profile of a MIG device of `gpu_name` with this memory and SM count, or None.

    Known families match a GPU instance profile on SM count and memory (within 15 %). A
    device with fewer SMs than any profile of its memory is a compute instance inside a larger
    GPU instance (`1c.3g.40gb`); `gpu_instance_sm_count` (the SMs of all compute instances of
    that GPU instance together) picks between GPU instance profiles of equal memory. Other GPUs
    use `floor(SMs / SMs per slice)` slices and the memory rounded up to whole GiB.
    """
    if not memory_mib:
        return None
    table = _family(gpu_name or "")
    if table:

        def near(row: tuple[str, int, int]) -> bool:
            return abs(row[2] - memory_mib) <= _TOLERANCE * row[2]

        exact = [row for row in table if row[1] == sm_count and near(row)]
        if len(exact) == 1:
            return exact[0][0]
        if sm_count:
            larger = [row for row in table if row[1] > sm_count and near(row)]
            if larger:
                target = gpu_instance_sm_count or 0
                row = min(larger, key=lambda r: (abs(r[2] - memory_mib), abs(r[1] - target), r[1]))
                gi_slices = parse_mig_profile(row[0])[1] or 1
                ci_slices = max(1, round(gi_slices * sm_count / row[1]))
                return f"{ci_slices}c.{row[0]}" if ci_slices < gi_slices else row[0]
    if not sm_count:
        return None
    per_slice = _SMS_PER_SLICE.get((architecture or "").lower())
    if per_slice is None:
        ampere = any(k in (gpu_name or "").upper() for k in ("A100", "A30", "A800"))
        per_slice = 14 if ampere else 16
    slices = min(7, max(1, sm_count // per_slice))
    return f"{slices}g.{math.ceil(memory_mib / 1024)}gb"


def normalize_mig_profile(value: str | None) -> str | None:
    """`mig-1g.10gb`, `nvidia_a100_1g.5gb`, `a100_3g.20gb`, `MIG 1g.10gb` -> `1g.10gb`.

    The profile inside a scheduler's resource name, GRES type or label, lower-case and without
    a suffix, so that every layer counts the same profiles; None when there is none.
    """
    if not value:
        return None
    match = PROFILE_RE.search(value)
    return match.group(0).lower() if match else None


def parse_mig_profile(profile: str | None) -> tuple[str, int | None, int | None]:
    """`1c.3g.40gb` -> ("3g.40gb", 3, 1): the GPU instance profile, its compute slices, and
    the compute slices of this compute instance; None where the profile cannot be read.

    The whole text must be a profile (a suffix such as `+me` stays on the GPU instance
    profile): this reads a device's own profile, not a scheduler's wrapping of it.
    """
    match = _DEVICE_PROFILE_RE.fullmatch((profile or "").strip())
    if not match:
        return profile or "", None, None
    gi_slices = int(match["g"])
    ci_slices = int(match["ci"]) if match["ci"] else gi_slices
    return match["gi"] + match["suffix"], gi_slices, ci_slices


def mig_profile_name(name: str | None) -> str | None:
    """`MIG 1g.10gb` -> `1g.10gb`: NVML and nvidia-smi name profiles with a `MIG ` prefix."""
    name = (name or "").strip()
    if name.upper().startswith("MIG "):
        name = name[4:].strip()
    return name or None


def mig_slices(gpu_name: str | None) -> tuple[int, int]:
    """(compute slices, memory slices): A30 has 4 and 4; A100, H100, H200, B200 7 and 8."""
    return (4, 4) if "A30" in (gpu_name or "").upper() else (7, 8)
