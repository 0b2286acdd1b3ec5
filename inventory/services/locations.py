"""Where servers stand and what their NICs plug into: entered by people, never by agents.

Agents cannot know a rack or a switch port, yet failure domains need them. `locations_import`
takes CSV rows `hostname,rack,position[,nic,switch,port]` (one row per NIC when several are
cabled) and sets Server.rack/rack_position and Nic.switch/switch_port in a fixed number of
queries, all or nothing.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Lower

from inventory.models import Nic, Server

COLUMNS = ("hostname", "rack", "position", "nic", "switch", "port")


@dataclass
class LocationImportResult:
    rows: int = 0
    servers_updated: int = 0
    nics_updated: int = 0
    errors: list[str] = field(default_factory=list)
    applied: bool = False


def locations_parse(text: str) -> list[tuple[int, dict[str, str]]]:
    """CSV text to (line number, row) pairs; a header row naming `hostname` is optional."""
    rows = []
    for number, cells in enumerate(csv.reader(io.StringIO(text)), start=1):
        cells = [c.strip() for c in cells]
        if not any(cells) or cells[0].startswith("#"):
            continue
        if number == 1 and cells[0].lower() == "hostname":
            continue
        rows.append((number, dict(zip(COLUMNS, cells + [""] * len(COLUMNS), strict=False))))
    return rows


def locations_import(
    *, rows: Iterable[tuple[int, dict[str, str]]], skip_errors: bool = False
) -> LocationImportResult:
    """Set racks, positions and switch ports; nothing is written when a row is wrong, unless
    skip_errors (then the good rows are). Servers match by hostname or FQDN, any case; NICs by
    name (`mlx5_0`) or netdev (`ens1f0np0`)."""
    rows = list(rows)
    result = LocationImportResult(rows=len(rows))
    wanted = {r["hostname"].lower() for _, r in rows if r.get("hostname")}
    servers: dict[str, list[Server]] = {}
    candidates = Server.objects.annotate(h=Lower("hostname"), f=Lower("fqdn")).filter(
        Q(h__in=wanted) | Q(f__in=wanted)
    )
    for server in candidates.only("id", "hostname", "fqdn", "rack", "rack_position"):
        for key in {server.hostname.lower(), (server.fqdn or "").lower()} - {""}:
            if key in wanted:
                servers.setdefault(key, []).append(server)
    nics: dict[int, list[Nic]] = {}
    server_ids = {s.pk for found in servers.values() for s in found}
    for nic in Nic.objects.filter(server_id__in=server_ids).only(
        "id", "server_id", "name", "netdev", "switch", "switch_port"
    ):
        nics.setdefault(nic.server_id, []).append(nic)
    changed_servers: dict[int, Server] = {}
    changed_nics: dict[int, Nic] = {}
    for number, row in rows:
        error = _apply_row(row, servers, nics, changed_servers, changed_nics)
        if error:
            result.errors.append(f"line {number}: {error}")
    if result.errors and not skip_errors:
        return result
    with transaction.atomic():
        Server.objects.bulk_update(changed_servers.values(), ["rack", "rack_position"], 1000)
        Nic.objects.bulk_update(changed_nics.values(), ["switch", "switch_port"], 1000)
    result.servers_updated = len(changed_servers)
    result.nics_updated = len(changed_nics)
    result.applied = True
    return result


def _apply_row(
    row: dict[str, str],
    servers: dict[str, list[Server]],
    nics: dict[int, list[Nic]],
    changed_servers: dict[int, Server],
    changed_nics: dict[int, Nic],
) -> str | None:
    hostname = row.get("hostname", "")
    found = servers.get(hostname.lower(), [])
    if not hostname:
        return "no hostname"
    if not found:
        return f"no server named {hostname!r}"
    if len({s.pk for s in found}) > 1:
        return f"several servers are named {hostname!r}"
    server = changed_servers.get(found[0].pk, found[0])
    position = row.get("position", "")
    if position and not position.isdigit():
        return f"position {position!r} is not a rack unit number"
    if len(row.get("rack", "")) > 64:
        return "rack name longer than 64 characters"
    server.rack = row.get("rack", "")
    server.rack_position = int(position) if position else None
    changed_servers[server.pk] = server
    nic_name = row.get("nic", "")
    if not nic_name:
        if row.get("switch") or row.get("port"):
            return "a switch or port needs the NIC it is cabled to"
        return None
    matches = [n for n in nics.get(server.pk, []) if nic_name in (n.name, n.netdev)]
    if not matches:
        return f"{hostname} has no NIC {nic_name!r}"
    nic = changed_nics.get(matches[0].pk, matches[0])
    nic.switch = row.get("switch", "")[:128]
    nic.switch_port = row.get("port", "")[:64]
    changed_nics[nic.pk] = nic
    return None
