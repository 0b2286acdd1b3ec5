"""Rules on where servers are, after NetBox's checks of its own records: an IP address that
several live servers report, and servers whose rack units overlap.

Both compare servers across the whole fleet, and read nothing of a server but its name, its
addresses, its age and its place in a rack (`location_inputs`): a pass of changes judges them
whole again over those facts alone (`clusters.reconcile`), when one of them changed.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from findings.choices import FindingType, Severity
from findings.facts import FindingFact
from inventory.chassis import chassis_height_u

from .types import Fleet, ServerFacts
from .words import plural

IGNORED_ADDRESSES: tuple[str, ...] = (
    "127.0.0.0/8",  # loopback: every host has it
    "::1/128",  # loopback (IPv6)
    "fe80::/10",  # link-local (IPv6): unique per link, not per fleet
    "169.254.0.0/16",  # link-local (IPv4): cloud metadata, zeroconf
    "172.17.0.1/32",  # docker0: Docker's default bridge, on every host that runs Docker
    "192.168.122.1/32",  # virbr0: libvirt's default network, on every KVM host
    "10.88.0.1/32",  # cni-podman0 / podman: Podman's default bridge
)
"""Addresses that many servers hold by design, never a conflict: left out of
`ip_address_duplicate`. Only the bridge's own default address is listed; an address a person
gave such a bridge elsewhere is still compared."""

_IGNORED = tuple(ipaddress.ip_network(n) for n in IGNORED_ADDRESSES)

NAMES_MOST = 5
"""How many servers a finding here names (the first by hostname); the rest are counted."""


def ip_address_duplicate(fleet: Fleet) -> list[FindingFact]:
    """An IP address that more than one live (not offline) server reports: one of them is
    misconfigured, and traffic (and nodes bound by address) may reach the wrong one. A VM and
    its host do not share addresses either. One finding per address (`address:<ip>`), naming
    its first NAMES_MOST servers by hostname; `IGNORED_ADDRESSES` are left out, and so are
    values that are not IP addresses (host names)."""
    on: dict[str, list[ServerFacts]] = defaultdict(list)
    for server in fleet.servers.values():
        if fleet.is_live(server):
            for address in _ip_addresses(server.addresses):
                on[address].append(server)
    found = []
    for address, servers in sorted(on.items()):
        if len(servers) < 2:
            continue
        servers.sort(key=lambda s: (s.hostname, s.id))
        names = [s.hostname for s in servers[:NAMES_MOST]]
        found.append(
            FindingFact(
                FindingType.IP_ADDRESS_DUPLICATE,
                Severity.WARNING,
                f"address:{address}",
                f"{address} is on {plural(len(servers), 'live server')}"
                f"{_named(names, len(servers))}: one address, several machines; traffic to it "
                "and nodes bound by it may reach the wrong one",
                server_id=servers[0].id,
                details={"address": address, "servers": names, "count": len(servers)},
            )
        )
    return found


def _ip_addresses(values: Iterable[str]) -> set[str]:
    """The IP addresses (without prefix length, in their short form) of the values an agent
    reports (`10.0.0.7/24`), less the ignored ones; each once."""
    found = set()
    for value in values:
        try:
            address = ipaddress.ip_interface((value or "").strip()).ip
        except ValueError:
            continue
        if not any(address in network for network in _IGNORED):
            found.add(address.compressed)
    return found


class _Placed(NamedTuple):
    """A server's units in its rack: `first` to `last`, both taken."""

    first: int
    last: int
    hostname: str
    id: int
    units: int
    known: bool


def rack_units_overlap(fleet: Fleet) -> list[FindingFact]:
    """Two servers in one rack whose units overlap: one of the rack positions people set is
    wrong. A server takes the units from its position up, as high as its chassis
    (`inventory.chassis`); one of unknown height counts as 1U (the least it can take), so every
    overlap reported is certain. VMs and servers without a rack or position are not placed.
    One finding per pair (`server:<lower id>:overlaps:<higher id>`), naming both and their
    units."""
    by_rack: dict[str, list[_Placed]] = defaultdict(list)
    for s in fleet.servers.values():
        if s.rack and s.rack_position and not s.is_virtual:
            height, known = chassis_height_u(s.product or s.vendor)
            units = height if known else 1
            placed = _Placed(
                s.rack_position, s.rack_position + units - 1, s.hostname, s.id, units, known
            )
            by_rack[s.rack].append(placed)
    found = []
    for rack, in_rack in sorted(by_rack.items()):
        in_rack.sort()
        for i, upper in enumerate(in_rack):
            for lower in in_rack[:i]:
                if lower.last >= upper.first:
                    found.append(_overlap(rack, lower, upper))
    return found


def _overlap(rack: str, lower: _Placed, upper: _Placed) -> FindingFact:
    first, last = upper.first, min(lower.last, upper.last)
    a, b = sorted((lower, upper), key=lambda p: p.id)
    return FindingFact(
        FindingType.RACK_UNITS_OVERLAP,
        Severity.WARNING,
        f"server:{a.id}:overlaps:{b.id}",
        f"rack {rack}: {_where(lower)} and {_where(upper)} overlap at {_units(first, last)}; "
        "two servers cannot share a rack unit: fix the rack position of one",
        server_id=a.id,
        details={
            "rack": rack,
            "servers": [
                {"hostname": p.hostname, "units": [p.first, p.last], "height_known": p.known}
                for p in (lower, upper)
            ],
            "overlap": [first, last],
        },
    )


def _where(p: _Placed) -> str:
    """`dgx-01 (U10-U17, 8U)`, or `(U10, height unknown: counted 1U)`."""
    size = f"{p.units}U" if p.known else "height unknown: counted 1U"
    return f"{p.hostname} ({_units(p.first, p.last)}, {size})"


def _units(first: int, last: int) -> str:
    return f"U{first}" if first == last else f"U{first}-U{last}"


def _named(hostnames: Sequence[str], count: int) -> str:
    """` (a, b and 3 more)`."""
    more = count - len(hostnames)
    return " (" + ", ".join(hostnames) + (f" and {more} more" if more > 0 else "") + ")"


def location_inputs(fleet: Fleet, server: ServerFacts) -> dict[str, list[Any]]:
    """What each rule here reads of one server, by rule: a pass of changes judges a rule
    again when this changed for one of the servers it judges (`clusters.judged.versions_of`)."""
    return {
        ip_address_duplicate.__name__: [
            server.hostname,
            fleet.is_live(server),
            sorted(server.addresses),
        ],
        rack_units_overlap.__name__: [
            server.hostname,
            server.rack,
            server.rack_position,
            server.product,
            server.vendor,
            server.is_virtual,
        ],
    }
