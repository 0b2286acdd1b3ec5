"""LLDP neighbours from lldpd: `lldpcli -f json0 show neighbors details`, a pure parser.

json0 keeps one shape whatever the count: every object is a list (`"lldp": [{"interface":
[...]}]`) and every scalar a list of `{"value": ...}` (ids add a `type`). Ethernet fabrics are
learnt from it: the switch and port at the far end of each server NIC. Text that is not
json0 gives no neighbours, never an error: a server without lldpd still reports.
"""

from __future__ import annotations

import json
from typing import Any

COMMAND = ("lldpcli", "-f", "json0", "show", "neighbors", "details")
MAX_NEIGHBORS = 8  # per interface: the schema's bound
_TEXT_LIMITS = {"system_name": 128, "chassis_id": 128, "port_id": 128, "port_description": 256}


def _items(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    return [] if value is None else [value]


def _first(value: Any, limit: int = 128) -> str | None:
    """The first `{"value": ...}` of a json0 list (or a bare scalar), stripped and bounded."""
    for item in _items(value):
        raw = item.get("value") if isinstance(item, dict) else item
        if isinstance(raw, str | int | float) and not isinstance(raw, bool):
            text = str(raw).strip()
            if text:
                return text[:limit]
    return None


def _neighbor(entry: dict[str, Any]) -> dict[str, Any] | None:
    chassis = next((c for c in _items(entry.get("chassis")) if isinstance(c, dict)), {})
    port = next((p for p in _items(entry.get("port")) if isinstance(p, dict)), {})
    found = {
        "system_name": _first(chassis.get("name"), _TEXT_LIMITS["system_name"]),
        "chassis_id": _first(chassis.get("id"), _TEXT_LIMITS["chassis_id"]),
        "port_id": _first(port.get("id"), _TEXT_LIMITS["port_id"]),
        "port_description": _first(port.get("descr"), _TEXT_LIMITS["port_description"]),
        "management_address": _first(chassis.get("mgmt-ip"), 64),
    }
    return found if any(found.values()) else None


def parse_lldp_neighbors(text: str | None) -> dict[str, list[dict[str, Any]]]:
    """json0 text -> {local interface (netdev): [neighbour, ...]}; {} for anything else.

    A neighbour is `system_name`, `chassis_id`, `port_id`, `port_description` and
    `management_address` (the first one), each a string or None.
    """
    try:
        document = json.loads(text or "")
    except ValueError:
        return {}
    if not isinstance(document, dict):
        return {}
    found: dict[str, list[dict[str, Any]]] = {}
    for block in _items(document.get("lldp")):
        if not isinstance(block, dict):
            continue
        for entry in _items(block.get("interface")):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                continue
            neighbor = _neighbor(entry)
            listed = found.setdefault(entry["name"], [])
            if neighbor is not None and len(listed) < MAX_NEIGHBORS:
                listed.append(neighbor)
    return {name: listed for name, listed in sorted(found.items()) if listed}
