"""Names and bindings of fabric nodes. Pure functions over plain facts.

An adapter binds to a server by the GUIDs the server's agent reported, else by the name the
node-name map gives it, else by the first word of its node description (rdma-ndd's default
is `<hostname> <device>`). A name that matches no server, or more than one, binds nothing:
the adapter stays unbound and is listed as such, never guessed. Adapters that belong to a
switch (SHARP aggregation nodes) and routers are no server's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from inventory.identity import short_hostname

HOST = "host"
AGGREGATION = "aggregation"
ROUTER_ROLE = "router"

BY_GUID = "guid"
BY_NAME_MAP = "node_name_map"
BY_DESCRIPTION = "description"
BY_LLDP = "lldp"  # an Ethernet NIC: its own server's agent heard the switch
UNBOUND = ""

# Descriptions firmware leaves when nobody set one: "MT4129 ConnectX7   Mellanox
# Technologies", "Mellanox Technologies Aggregation Node", "SwitchIB Mellanox Technologies".
UNSET_DESCRIPTION = re.compile(r"^(?:MT\d+\b|.*\bMellanox Technologies\b|.*\bAggregation Node\b)")
MELLANOX_SWITCH = re.compile(r"^MF0;([^:]+):")
HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def description_set(description: str) -> bool:
    """False for empty and firmware-default descriptions (they name no host)."""
    return bool(description.strip()) and not UNSET_DESCRIPTION.match(description)


def host_name_of(description: str) -> str:
    """The host part of a node description or map name (`dgx-07 mlx5_0` -> `dgx-07`); "" if none."""
    if not description_set(description):
        return ""
    word = description.split()[0]
    return word if HOST_NAME.match(word) else ""


def nic_label_of(description: str) -> str:
    """The device part (`dgx-07 mlx5_0` -> `mlx5_0`, `o0001 HCA-1` -> `HCA-1`); "" if none."""
    if not host_name_of(description):
        return ""
    words = description.split()
    return words[1] if len(words) > 1 else ""


def switch_name_of(description: str, mapped: str | None = None) -> str:
    """A switch's name: the node-name map's, else the host part of a Mellanox/NVIDIA
    description (`MF0;A09-P1-IBLEAF-04-04:MQM9701/U1` -> `A09-P1-IBLEAF-04-04`), else the
    description itself."""
    if mapped:
        return mapped
    m = MELLANOX_SWITCH.match(description)
    return m[1] if m else description.strip()


def adapter_role(kind: str, description: str, system_guid: str | None, switch_systems: set) -> str:
    """`host`, `aggregation` (a CA inside a switch: same system image GUID) or `router`."""
    if kind == "router":
        return ROUTER_ROLE
    if (system_guid and system_guid in switch_systems) or "Aggregation Node" in description:
        return AGGREGATION
    return HOST


def server_name_index(servers: Iterable[tuple[int, str, str]]) -> dict[str, int]:
    """Short host name (lower-case) -> server id, from (id, hostname, fqdn) rows; a name
    two servers share is left out, so it binds neither."""
    index: dict[str, int] = {}
    clashes: set[str] = set()
    for server_id, hostname, fqdn in servers:
        for name in {short_hostname(hostname), short_hostname(fqdn)} - {""}:
            if index.get(name, server_id) != server_id:
                clashes.add(name)
            index[name] = server_id
    for name in clashes:
        index.pop(name, None)
    return index


def server_guid_index(nics: Iterable[tuple[int, str, Iterable[str]]]) -> dict[str, int]:
    """Node and port GUID -> server id, from (server id, node GUID, port GUIDs) rows of the
    NICs agents reported. A GUID two servers report (a card moved while its old server is
    still listed) is left out, so it binds neither: binding never guesses."""
    index: dict[str, int] = {}
    clashes: set[str] = set()
    for server_id, node_guid, port_guids in nics:
        for guid in {node_guid, *port_guids} - {""}:
            guid = guid.lower()
            if index.get(guid, server_id) != server_id:
                clashes.add(guid)
            index[guid] = server_id
    for guid in clashes:
        index.pop(guid, None)
    return index


@dataclass(frozen=True, slots=True)
class AdapterIdentity:
    guid: str
    port_guids: tuple[str, ...]
    description: str
    role: str = HOST


@dataclass(frozen=True, slots=True)
class Binding:
    host_name: str
    server_id: int | None
    method: str


def bind_adapter(
    adapter: AdapterIdentity,
    *,
    servers_by_guid: Mapping[str, int],
    mapped_names: Mapping[str, str],
    servers_by_name: Mapping[str, int],
) -> Binding:
    """One adapter's host name and server, with how the server was found.

    `servers_by_guid` holds the node and port GUIDs (16 hex digits) agents reported for
    their InfiniBand NICs (`server_guid_index`); it decides first, whatever the names say.
    """
    mapped = mapped_names.get(adapter.guid) or next(
        (mapped_names[g] for g in adapter.port_guids if g in mapped_names), ""
    )
    host_name = host_name_of(mapped) if mapped else host_name_of(adapter.description)
    if adapter.role != HOST:
        return Binding(host_name="", server_id=None, method=UNBOUND)
    for guid in (adapter.guid, *adapter.port_guids):
        if guid in servers_by_guid:
            return Binding(host_name=host_name, server_id=servers_by_guid[guid], method=BY_GUID)
    if mapped:
        server = servers_by_name.get(short_hostname(host_name_of(mapped)))
        if server is not None:
            return Binding(host_name=host_name, server_id=server, method=BY_NAME_MAP)
    described = host_name_of(adapter.description)
    server = servers_by_name.get(short_hostname(described)) if described else None
    if server is not None:
        return Binding(host_name=host_name, server_id=server, method=BY_DESCRIPTION)
    return Binding(host_name=host_name, server_id=None, method=UNBOUND)
