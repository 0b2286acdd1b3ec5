"""What an event means and what to do: NVIDIA's XID catalog (data, with its source named in
`data/xid_catalog.json`), NVSwitch SXids by the severity their own line states, and the two
events the kernel prints without a code (a GPU fallen off the bus, a failed probe).

Severity comes from NVIDIA's "immediate action" bucket: a GPU reset, a reboot, a check of
the hardware are critical (the GPU cannot be trusted with work until done); restarting the
application is a warning; "ignore" is information. The action is a plain sentence for a
person; `immediate`/`investigatory` keep NVIDIA's own bucket names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .choices import EventKind, Severity

CATALOG_FILE = Path(__file__).resolve().parent / "data" / "xid_catalog.json"

ACTIONS = {
    "RESET_GPU": "Drain the GPU and reset it (nvidia-smi -r), or reboot the node.",
    "RESTART_BM": "Drain the node and reboot it; if it recurs, reseat or replace the GPU.",
    "RESTART_VM": "Restart the VM that holds the GPU.",
    "RESTART_APP": "Restart the application; the GPU needs no action unless this repeats.",
    "IGNORE": "No action needed.",
    "CONTACT_SUPPORT": "Collect nvidia-bug-report.sh output and contact NVIDIA support.",
    "CHECK_MECHANICALS": "Check the GPU's auxiliary power cables and its seating.",
    "UPDATE_SWFW": "Update the NVIDIA driver and the GPU firmware.",
    "CHECK_UVM": "Check the UVM driver and the application's managed memory; restart it.",
    "WORKFLOW_XID_48": (
        "Double-bit ECC error: drain the GPU and reset it so the row is remapped; replace "
        "(RMA) the GPU when remapping fails or the errors come back."
    ),
    "WORKFLOW_XID_45": (
        "Clean-up after another error: act on that Xid; seen alone, restart the fabric manager."
    ),
    "WORKFLOW_NVLINK_ERR": (
        "NVLink error: drain and reset the GPU; if it recurs, check the NVLink/NVSwitch fabric "
        "and the fabric manager."
    ),
    "WORKFLOW_NVLINK5_ERR": (
        "NVLink error: drain and reset the GPU; if it recurs, check the NVLink/NVSwitch fabric "
        "and the fabric manager."
    ),
    "XID_154": (
        "The driver changed its recommended recovery action: read it (nvidia-smi -q, GPU "
        "Recovery Action) and follow it."
    ),
}
UNCATALOGUED_ACTION = (
    "Not in NVIDIA's Xid catalog: collect nvidia-bug-report.sh output; contact NVIDIA support "
    "if it repeats."
)
CRITICAL_NO_ACTION = "Drain the GPU and reset it or reboot the node; contact NVIDIA support."
FALLEN_OFF_BUS_ACTION = (
    "Drain the node and reboot it (as for Xid 79); if it recurs, reseat the GPU and check the "
    "slot, riser and power."
)
PROBE_FAILURE_ACTION = (
    "The driver could not initialise the GPU: check the kernel log, power-cycle the node; "
    "reseat or replace the GPU if it persists."
)
SXID_FATAL_ACTION = (
    "Fatal NVSwitch error: drain the GPUs on this baseboard and reset them (or reboot); "
    "contact NVIDIA support if it recurs."
)
SXID_NONFATAL_ACTION = "Non-fatal NVSwitch error: no action unless it repeats."


@dataclass(frozen=True)
class EventInfo:
    """What one event means and what to do about it."""

    severity: str
    action: str
    meaning: str
    mnemonic: str = ""
    immediate: str = ""
    investigatory: str = ""


@cache
def _catalog() -> dict[str, Any]:
    return json.loads(CATALOG_FILE.read_text("utf-8"))


@cache
def xid_codes() -> dict[int, dict[str, Any]]:
    return {entry["code"]: entry for entry in _catalog()["codes"]}


def catalog_source() -> dict[str, str]:
    """The catalog's source: title, URL and the day it was read."""
    return dict(_catalog()["source"])


def xid_info(code: int | None) -> EventInfo:
    entry = xid_codes().get(code) if code is not None else None
    if entry is None:
        return EventInfo(Severity.WARNING, UNCATALOGUED_ACTION, "Xid not in NVIDIA's catalog")
    catalog = _catalog()
    immediate = entry["immediate"]
    if immediate:
        severity = catalog["severity_of_immediate_action"].get(immediate, Severity.WARNING)
        action = ACTIONS.get(immediate, UNCATALOGUED_ACTION)
    else:
        severity = catalog["severity_where_the_catalog_gives_no_action"].get(
            str(entry["code"]), Severity.WARNING
        )
        action = CRITICAL_NO_ACTION if severity == Severity.CRITICAL else ACTIONS["IGNORE"]
    return EventInfo(
        severity=severity,
        action=action,
        meaning=entry["description"],
        mnemonic=entry["mnemonic"],
        immediate=immediate,
        investigatory=entry["investigatory"],
    )


def event_info(kind: str, code: int | None, message: str = "") -> EventInfo:
    """Severity, action and meaning of one event of any kind."""
    if kind == EventKind.XID:
        return xid_info(code)
    if kind == EventKind.SXID:
        # the SXid line states its own severity: "12028, Non-fatal, Link 32 ..."
        fatal = message.lower().lstrip().startswith("fatal")
        return EventInfo(
            Severity.CRITICAL if fatal else Severity.WARNING,
            SXID_FATAL_ACTION if fatal else SXID_NONFATAL_ACTION,
            "NVSwitch error (fatal)" if fatal else "NVSwitch error (non-fatal)",
        )
    if kind == EventKind.FALLEN_OFF_BUS:
        return EventInfo(Severity.CRITICAL, FALLEN_OFF_BUS_ACTION, "GPU has fallen off the bus")
    return EventInfo(Severity.CRITICAL, PROBE_FAILURE_ACTION, "the driver failed to probe the GPU")
