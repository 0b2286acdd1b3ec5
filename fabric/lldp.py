"""Ethernet fabrics from LLDP: the switch and port at the far end of each server NIC, as the
servers' agents hear them from lldpd. Pure: plain NIC facts in, switches, adapters and cables
out, shaped like what an ibnetdiscover snapshot gives, so the fabric's own upserts, tiers,
rails and pages take them unchanged.

Agents run on servers only, so LLDP sees each server's cables to its leaves and nothing
between switches: every switch it names is a leaf. Identity: a switch is its LLDP chassis id
(a MAC as 12 hex digits; any other id, or a switch that gives only its name, as 16 hex
digits of its hash), a server NIC its MAC (else its server and name, hashed), a cable its
switch, port and NIC, so the same cable is the same row from one pass to the next.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .parsers.detect import MAX_PORT

PORT_NAME_MAX = 64
NAME_MAX = 256
_MAC = re.compile(r"^[0-9a-f]{2}([:-]?)[0-9a-f]{2}(?:\1[0-9a-f]{2}){4}$")
_TRAILING_NUMBER = re.compile(r"(\d+)\D*$")


@dataclass(frozen=True, slots=True)
class NicFact:
    """A server NIC and the LLDP neighbours its agent reported on it."""

    nic_id: int
    server_id: int
    hostname: str
    name: str
    mac: str
    speed_mbps: int | None
    state: str
    neighbors: Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class LldpSwitch:
    guid: str
    name: str
    description: str


@dataclass(frozen=True, slots=True)
class LldpAdapter:
    guid: str
    server_id: int
    host_name: str
    nic: str
    description: str


@dataclass(frozen=True, slots=True)
class LldpLink:
    key: str
    switch: str
    port: int
    port_name: str
    adapter: str
    lane_speed: str
    gbps: float | None
    up: bool


@dataclass(slots=True)
class LldpFabric:
    """What LLDP says of the fleet: switches and NICs by identity, the cables between them,
    and per NIC id the (switch name, port name) of its first neighbour."""

    switches: dict[str, LldpSwitch] = field(default_factory=dict)
    adapters: dict[str, LldpAdapter] = field(default_factory=dict)
    links: list[LldpLink] = field(default_factory=list)
    nic_ports: dict[int, tuple[str, str]] = field(default_factory=dict)


def _hash16(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _mac_hex(value: str | None) -> str:
    """`1C:34:DA:5E:60:00` -> `1c34da5e6000`; "" for anything that is not a MAC."""
    text = (value or "").strip().lower()
    return re.sub(r"[:-]", "", text) if _MAC.match(text) else ""


def switch_guid(chassis_id: str | None, system_name: str | None) -> str:
    """A switch's identity from its chassis id (else its name); "" when it gives neither."""
    mac = _mac_hex(chassis_id)
    if mac:
        return mac
    if chassis_id and chassis_id.strip():
        return _hash16(f"chassis:{chassis_id.strip()}")
    if system_name and system_name.strip():
        return _hash16(f"name:{system_name.strip().lower()}")
    return ""


def port_name(neighbor: Mapping[str, Any]) -> str:
    """The switch port as people name it: the LLDP port id (`swp17`, `Ethernet1/17`), unless
    that is a MAC or a bare SNMP ifIndex and the port description says more."""
    port_id = str(neighbor.get("port_id") or "").strip()
    description = str(neighbor.get("port_description") or "").strip()
    if description and (not port_id or _mac_hex(port_id) or port_id.isdigit()):
        return description[:PORT_NAME_MAX]
    return port_id[:PORT_NAME_MAX]


def port_number(name: str) -> int:
    """The number a port name ends with (`Ethernet1/17` -> 17; `swp3s1` -> 1), for ordering;
    0 when it has none."""
    found = _TRAILING_NUMBER.search(name)
    return min(int(found[1]), MAX_PORT) if found else 0


def ethernet_rate(speed_mbps: int | None) -> tuple[str, float | None]:
    """A NIC's link speed as the fabric writes a cable's rate: (`400GbE`, 400.0); unknown
    ("???", None) when the NIC did not say."""
    if not speed_mbps or speed_mbps <= 0:
        return "???", None
    gbps = speed_mbps / 1000
    label = f"{gbps:g}GbE"
    return (label if len(label) <= 8 else "???"), gbps


def lldp_fabric(nics: Iterable[NicFact]) -> LldpFabric:
    """Switches, server NICs and cables from every NIC's LLDP neighbours.

    A NIC MAC that two NICs report (a bond's shared MAC, a cloned VM) names neither: both
    fall back to their server and name. A neighbour without a chassis id or name is skipped.
    """
    facts = [nic for nic in nics if nic.neighbors]
    macs = Counter(_mac_hex(nic.mac) for nic in facts)
    found = LldpFabric()
    for nic in facts:
        mac = _mac_hex(nic.mac)
        adapter = mac if mac and macs[mac] == 1 else _hash16(f"nic:{nic.server_id}:{nic.name}")
        lane_speed, gbps = ethernet_rate(nic.speed_mbps)
        linked = False
        for neighbor in nic.neighbors:
            guid = switch_guid(neighbor.get("chassis_id"), neighbor.get("system_name"))
            if not guid:
                continue
            name = str(neighbor.get("system_name") or neighbor.get("chassis_id") or guid)
            management = str(neighbor.get("management_address") or "")
            described = f"{name} (management {management})" if management else name
            found.switches.setdefault(guid, LldpSwitch(guid, name[:NAME_MAX], described[:NAME_MAX]))
            port = port_name(neighbor)
            found.links.append(
                LldpLink(
                    key=f"{guid}:{_hash16(port)[:10]}>{adapter}",
                    switch=guid,
                    port=port_number(port),
                    port_name=port,
                    adapter=adapter,
                    lane_speed=lane_speed,
                    gbps=gbps,
                    up=nic.state.lower() not in ("down", "lowerlayerdown", "disabled"),
                )
            )
            found.nic_ports.setdefault(nic.nic_id, (found.switches[guid].name[:128], port))
            linked = True
        if linked:
            found.adapters[adapter] = LldpAdapter(
                guid=adapter,
                server_id=nic.server_id,
                host_name=nic.hostname,
                nic=nic.name[:64],
                description=f"{nic.hostname} {nic.name}"[:NAME_MAX],
            )
    found.links = list({link.key: link for link in found.links}.values())
    return found


def fill_switch_port(
    current: tuple[str, str], before: tuple[str, str] | None, now: tuple[str, str] | None
) -> tuple[str, str]:
    """A NIC's (switch, port) after an LLDP pass: what LLDP hears now fills a NIC nobody
    cabled by hand, and follows a cable LLDP itself filled in before (`before`); a switch
    and port a person entered (`locations_import`) are kept."""
    if current == ("", "") or (before is not None and current == before):
        return now or ("", "")
    return current
