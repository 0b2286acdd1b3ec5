"""Value cleaning shared by the nvidia-smi parsers: placeholders, units, booleans.

nvidia-smi prints unknowns many ways across driver generations (`N/A`, `[N/A]`, `Not
Supported`, `[Not Supported]`, `Requested functionality has been deprecated`, ...); the
report wants null for all of them, and plain numbers in bytes and watts.
"""

from __future__ import annotations

import re

_PLACEHOLDERS = {
    "",
    "n/a",
    "na",
    "none",
    "unknown",
    "unknown error",
    "not supported",
    "not available",
    "not found",
    "insufficient permissions",
    "gpu is lost",
    "requested functionality has been deprecated",
}
_SIZE_UNITS = {
    "b": 1,
    "kib": 1024,
    "kb": 1024,
    "mib": 1024**2,
    "mb": 1024**2,
    "gib": 1024**3,
    "gb": 1024**3,
}
_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z%]*)")
_ZERO_UUID = re.compile(r"^(GPU|MIG)-0{8}-0{4}-0{4}-0{4}-0{12}$", re.IGNORECASE)


def clean(value: str | None) -> str | None:
    """The value, or None for every way nvidia-smi spells 'unknown'."""
    if value is None:
        return None
    value = " ".join(value.split())
    bare = value.strip("[]").strip().lower()
    return None if bare in _PLACEHOLDERS else value


def to_int(value: str | None) -> int | None:
    value = clean(value)
    if value is None:
        return None
    match = _NUMBER.match(value)
    if not match:
        return None
    try:
        return int(float(match.group(1)))
    except ValueError:
        return None


def to_float(value: str | None) -> float | None:
    value = clean(value)
    match = _NUMBER.match(value) if value else None
    return float(match.group(1)) if match else None


def to_bytes(value: str | None, default_unit: str = "mib") -> int | None:
    """'81559 MiB' -> bytes; a bare number is taken in `default_unit`."""
    value = clean(value)
    match = _NUMBER.match(value) if value else None
    if not match:
        return None
    unit = (match.group(2) or default_unit).lower()
    factor = _SIZE_UNITS.get(unit)
    return int(float(match.group(1)) * factor) if factor else None


def to_bool(value: str | None) -> bool | None:
    """Enabled/Disabled, Yes/No, Active/Not Active, True/False -> bool."""
    value = clean(value)
    if value is None:
        return None
    word = value.lower()
    if word in ("enabled", "yes", "active", "true", "on", "1"):
        return True
    if word in ("disabled", "no", "not active", "false", "off", "0"):
        return False
    return None


def real_uuid(value: str | None) -> str | None:
    """A UUID worth keeping: None for placeholders and for all-zero UUIDs (masked captures)."""
    value = clean(value)
    if value is None or _ZERO_UUID.match(value):
        return None
    return value


def real_serial(value: str | None) -> str | None:
    value = clean(value)
    if value is None or set(value) <= {"0"}:
        return None
    return value


def sum_counts(values: list[int | None]) -> int | None:
    """The sum of the known counts; None when none is known."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None
