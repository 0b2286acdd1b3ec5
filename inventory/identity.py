"""Server identity: the SMBIOS system UUID, else /etc/machine-id, else the hostname.

Some boards ship a placeholder SMBIOS UUID (all zeros, all F, or the famous
03000200-0400-0500-0006-000700080009); those identify nothing and fall through to the
machine-id. UUIDs compare case-insensitively (Kubernetes shows them upper-case, the kernel's
product_uuid lower-case), so they are stored lower-case.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PLACEHOLDER_UUIDS = frozenset(
    {
        "00000000-0000-0000-0000-000000000000",
        "ffffffff-ffff-ffff-ffff-ffffffffffff",
        "03000200-0400-0500-0006-000700080009",
        "not settable",
        "not specified",
        "to be filled by o.e.m.",
    }
)


def normalize_uuid(value: str | None) -> str | None:
    """Lower-case, stripped; None for empty values and known placeholders."""
    if not value:
        return None
    value = value.strip().lower()
    if not value or value in PLACEHOLDER_UUIDS:
        return None
    return value


def normalize_machine_id(value: str | None) -> str | None:
    if not value:
        return None
    value = value.strip().lower().replace("-", "")
    return value if value and set(value) != {"0"} else None


def short_hostname(name: str | None) -> str:
    return (name or "").strip().lower().rstrip(".").split(".", 1)[0]


def server_identity(host: Mapping[str, Any]) -> str:
    """The identity key a report's host section claims: `uuid:`, `machine-id:` or `hostname:`."""
    system_uuid = normalize_uuid(host.get("system_uuid"))
    if system_uuid:
        return f"uuid:{system_uuid}"
    machine_id = normalize_machine_id(host.get("machine_id"))
    if machine_id:
        return f"machine-id:{machine_id}"
    return f"hostname:{(host.get('hostname') or '').strip().lower()}"
