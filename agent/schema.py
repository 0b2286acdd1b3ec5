"""The report contract shared by the agent and the backend (`report.schema.json` beside this).

The backend imports this module; it must stay free of Django and of pynvml.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid as uuidlib
from functools import cache
from importlib import resources
from typing import Any

SCHEMA_VERSION = "cluster-atlas/report/v1"

# Not facts about the server: `events` are new each time (stored once each by health), so a
# report carrying some is never a heartbeat, and the next one without them is one again.
# GPU `processes` and `pod_resources` are facts on purpose: a new or stray process must reach
# the backend as a report, not vanish in a heartbeat.
VOLATILE_KEYS = ("collected_at", "events")
# The most `warnings` a report carries (the schema's maxItems): the agent cuts there, and the
# backend, merging a partial report's warnings with the last full one's, cuts there too.
MAX_WARNINGS = 256
# The agent names its facts' digest in this header (`sha256:<hex>`); with an empty body the
# backend answers 200 "unchanged" when it equals the last applied report's, else 409.
DIGEST_HEADER = "X-Atlas-Report-Digest"
DIGEST_SCHEME = "sha256:"
# Synthetic ids (GPUs or MIG devices a source names no UUID for) are UUIDv5 in this space,
# so the same server, GPU and instance always get the same id.
SYNTHETIC_NAMESPACE = uuidlib.UUID("6f1c1c52-3b1e-4d59-9a43-5a0f3c8b7e21")

_PCI_RE = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):"
    r"(?P<dev>[0-9a-fA-F]{1,2})\.(?P<fn>[0-7])$"
)


def report_digest(report: dict[str, Any]) -> str:
    """Hex SHA-256 of a report's facts: the report without VOLATILE_KEYS, as canonical JSON
    (keys sorted, no spaces, UTF-8). Equal facts, equal digest, on either end: the agent
    hashes the dict it sends, the backend the dict it decoded from that JSON.
    """
    facts = {key: value for key, value in report.items() if key not in VOLATILE_KEYS}
    # check_circular off: decoded JSON cannot be circular, and the check costs 15%.
    canonical = json.dumps(
        facts, sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


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


def synthetic_uuid(prefix: str, *parts: object) -> str:
    """A stable id for a device its source names no UUID for: `GPU-<uuid5>`, `MIG-<uuid5>`."""
    name = "/".join(str(p) for p in parts)
    return f"{prefix}-{uuidlib.uuid5(SYNTHETIC_NAMESPACE, name)}"
