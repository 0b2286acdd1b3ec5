"""The report contract shared by the agent and the backend (`report.schema.json` beside this).

The backend imports this module; it must stay free of Django and of pynvml.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

SCHEMA_VERSION = "cluster-atlas/report/v1"

_PCI_RE = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):"
    r"(?P<dev>[0-9a-fA-F]{1,2})\.(?P<fn>[0-7])$"
)


@cache
def load_schema() -> dict[str, Any]:
    """The JSON Schema of a v1 report (draft 2020-12)."""
    text = resources.files(__package__).joinpath("report.schema.json").read_text("utf-8")
    return json.loads(text)


def normalize_pci_bus_id(value: str | None) -> str | None:
    """`00000000:19:00.0` (NVML), `0000:19:00.0` (sysfs), `19:00.0` -> `0000:19:00.0`.

    NVML pads the domain to 8 digits and upper-cases; sysfs uses 4 lower-case digits. One
    form lets the agent match NVML's GPUs to the PCI bus, and the backend compare reports.
    Returns None for values that are not PCI addresses (`N/A`, empty).
    """
    if not value:
        return None
    match = _PCI_RE.match(value.strip())
    if not match:
        return None
    domain = int(match["domain"] or "0", 16)
    return f"{domain:04x}:{int(match['bus'], 16):02x}:{int(match['dev'], 16):02x}.{match['fn']}"
