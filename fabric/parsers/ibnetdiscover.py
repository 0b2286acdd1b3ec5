"""`ibnetdiscover` (the plain topology file) -> Discovery. Pure; one pass, compiled patterns.

The file is a block per node: id lines (`vendid=`, `devid=`, `sysimgguid=`, `switchguid=` /
`caguid=` / `rtguid=`), a header (`Switch 65 "S-<guid>" # "<description>" enhanced port 0
lid 73 lmc 0`, `Ca 1 "H-<guid>" # "<description>"`, `Rt ...`), then one line per port that
has something at its far end. ibnetdiscover prints every cable twice, once from each end,
and a block for every node it reached; so a cable whose far end never gets its own line, or
a node named by a port line that never gets a block, means the text stops early. Such
output is refused (FabricFormatError), never half-read. Lines of `-g` (grouping) and `-f`
(full) output are understood; anything else is refused with its line number.
"""

from __future__ import annotations

import re
from typing import NoReturn

from .records import (
    CA,
    LANE_GBPS,
    ROUTER,
    SWITCH,
    UNKNOWN,
    DiscoveredNode,
    Discovery,
    FabricFormatError,
    ordered_link,
)

FORMAT = "ibnetdiscover"

KIND_OF_LETTER = {"S": SWITCH, "H": CA, "R": ROUTER}
KIND_OF_HEADER = {"Switch": SWITCH, "Ca": CA, "Rt": ROUTER}

_GUID = r"([0-9a-fA-F]{1,16})"
_RATE = r"(\d+x|\?\?)([A-Z][A-Z0-9]*|\?\?\?)(?: s=\d+ w=\d+ v=\d+(?: e=\d+)?)?"
HEADER = re.compile(
    r'^(Switch|Ca|Rt)\s+(\d+)\s+"([SHR])-' + _GUID + r'"\s+# "(.*)"'
    r"(?: (?:enhanced|base) port 0 lid (\d+) lmc \d+)?(?: \(scp\))?\s*$"
)
SWITCH_PORT = re.compile(
    r"^\[(\d+)\](?:\[ext \d+\])?\s+\"([SHR])-" + _GUID + r"\"\[(\d+)\](?:\[ext \d+\])?"
    r"(?:\(" + _GUID + r"\))?\s+# \"(.*)\" lid (\d+) " + _RATE + r"(?: slot \d+| \(scp\))?\s*$"
)
CA_PORT = re.compile(
    r"^\[(\d+)\](?:\(" + _GUID + r"\))?\s+\"([SHR])-" + _GUID + r"\"\[(\d+)\](?:\[ext \d+\])?"
    r"(?:\s*\(" + _GUID + r"\))?\s+# lid (\d+) lmc \d+ \"(.*)\" lid (\d+) " + _RATE + r"\s*$"
)
ID_LINE = re.compile(
    r"^(?:vendid|devid)=0x[0-9a-fA-F]+\s*$"
    r"|^sysimgguid=0x" + _GUID + r"(?:\s+#.*)?$"
    r"|^switchguid=0x" + _GUID + r"\(" + _GUID + r"\)(?:\s+#.*)?$"
    r"|^(?:caguid|rtguid)=0x" + _GUID + r"\s*$"
)
GROUPING = re.compile(r"^(?:Chassis \d+.*|Non-Chassis Nodes|Hostname: .*)$")
INITIATED = re.compile(r"^# Initiated from node " + _GUID)


def _guid(text: str) -> str:
    return text.lower().rjust(16, "0")


class _Port:
    """One port line as printed: this end and what it says of the far end."""

    __slots__ = ("guid", "lid", "line", "peer", "peer_guid_of_port", "peer_lid", "port", "rate")

    def __init__(self, guid, port, lid, peer, peer_guid_of_port, peer_lid, rate, line):
        self.guid = guid
        self.port = port
        self.lid = lid
        self.peer = peer  # (kind, guid, port)
        self.peer_guid_of_port = peer_guid_of_port
        self.peer_lid = peer_lid
        self.rate = rate  # (width, speed)
        self.line = line


def parse_ibnetdiscover(text: str) -> Discovery:
    """Read a whole plain ibnetdiscover output; FabricFormatError says why it cannot be."""
    lines = text.split("\n")
    complete_last_line = text.endswith("\n")
    if complete_last_line:
        lines.pop()
    nodes: dict[str, DiscoveredNode] = {}
    ports: dict[tuple[str, int], _Port] = {}
    current: DiscoveredNode | None = None
    pending_system_guid: str | None = None
    pending_id_line = 0
    initiated_from = None
    last = len(lines)
    switch_port, ca_port = SWITCH_PORT.match, CA_PORT.match

    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        first = line[0]
        if first == "[":
            if current is None:
                raise FabricFormatError(f"line {number}: a port line before any node header")
            if current.kind == SWITCH:
                m = switch_port(line)
                if m is None:
                    _refuse(number, line, last, complete_last_line)
                port, letter, peer_guid, peer_port = int(m[1]), m[2], _guid(m[3]), int(m[4])
                peer_port_guid = _guid(m[5]) if m[5] else None
                entry = _Port(
                    current.guid,
                    port,
                    current.lid,
                    (KIND_OF_LETTER[letter], peer_guid, peer_port),
                    peer_port_guid,
                    int(m[7]),
                    (m[8], m[9]),
                    number,
                )
            else:
                m = ca_port(line)
                if m is None:
                    _refuse(number, line, last, complete_last_line)
                port = int(m[1])
                port_guid = _guid(m[2]) if m[2] else current.guid
                lid = int(m[7])
                current.port_guids[port] = port_guid
                current.port_lids[port] = lid
                peer_port_guid = _guid(m[6]) if m[6] else None
                entry = _Port(
                    current.guid,
                    port,
                    lid,
                    (KIND_OF_LETTER[m[3]], _guid(m[4]), int(m[5])),
                    peer_port_guid,
                    int(m[9]),
                    (m[10], m[11]),
                    number,
                )
            if number == last and not complete_last_line:
                _check_rate_complete(entry.rate, number)
            if (entry.guid, entry.port) in ports:
                raise FabricFormatError(f"line {number}: port {entry.port} printed twice")
            ports[(entry.guid, entry.port)] = entry
            continue
        if first == "#":
            found = INITIATED.match(line)
            if found:
                initiated_from = _guid(found[1])
            continue
        header = HEADER.match(line)
        if header:
            kind = KIND_OF_HEADER[header[1]]
            if KIND_OF_LETTER[header[3]] != kind:
                raise FabricFormatError(f"line {number}: a {header[1]} named {header[3]}-...")
            guid = _guid(header[4])
            if guid in nodes:
                raise FabricFormatError(f"line {number}: node {guid} described twice")
            current = DiscoveredNode(
                guid=guid,
                kind=kind,
                description=header[5],
                port_count=int(header[2]),
                lid=int(header[6]) if header[6] else None,
                system_guid=pending_system_guid,
            )
            nodes[guid] = current
            pending_system_guid, pending_id_line = None, 0
            continue
        ids = ID_LINE.match(line)
        if ids:
            if ids[1]:
                pending_system_guid = _guid(ids[1])
            pending_id_line = pending_id_line or number
            continue
        if GROUPING.match(line):
            continue
        _refuse(number, line, last, complete_last_line)

    if pending_id_line:
        raise FabricFormatError(
            f"cut short: the node whose block starts on line {pending_id_line} has no header"
        )
    return Discovery(
        format=FORMAT,
        nodes=nodes,
        links=_links(nodes, ports),
        initiated_from=initiated_from,
    )


def _refuse(number: int, line: str, last: int, complete_last_line: bool) -> NoReturn:
    if number == last and not complete_last_line:
        raise FabricFormatError(f"cut short: the output ends in the middle of line {number}")
    shown = line if len(line) <= 80 else line[:77] + "..."
    raise FabricFormatError(f"line {number} is not ibnetdiscover output: {shown!r}")


def _check_rate_complete(rate: tuple[str, str], number: int) -> None:
    """The unterminated last line must end on a whole rate (`4xND` is `4xNDR` cut)."""
    if rate[1] != UNKNOWN and rate[1] not in LANE_GBPS:
        raise FabricFormatError(f"cut short: the output ends in the middle of line {number}")


def _links(nodes: dict[str, DiscoveredNode], ports: dict[tuple[str, int], _Port]) -> list:
    """Each cable once, checked from both ends (a missing end means the text was cut)."""
    links = []
    problems: list[str] = []
    for (guid, port), entry in ports.items():
        peer_kind, peer_guid, peer_port = entry.peer
        peer = nodes.get(peer_guid)
        if peer is None:
            problems.append(
                f"line {entry.line}: port {port} of {guid} leads to {peer_guid}, "
                "which has no block of its own"
            )
            continue
        if peer.kind != peer_kind:
            raise FabricFormatError(f"line {entry.line}: {peer_guid} is a {peer.kind}")
        back = ports.get((peer_guid, peer_port))
        if back is None:
            problems.append(
                f"line {entry.line}: port {port} of {guid} leads to port {peer_port} of "
                f"{peer_guid}, whose block does not list it"
            )
            continue
        if (back.peer[1], back.peer[2]) != (guid, port):
            raise FabricFormatError(
                f"line {entry.line}: port {port} of {guid} and port {peer_port} of {peer_guid} "
                "disagree about their cable"
            )
        if entry.peer_guid_of_port and peer.kind != SWITCH:
            peer.port_guids.setdefault(peer_port, entry.peer_guid_of_port)
        mine = nodes[guid]
        if (mine.kind, guid, port) > (peer.kind, peer_guid, peer_port) and mine.kind == peer.kind:
            continue  # the same cable, taken from its other end
        if mine.kind != SWITCH and peer.kind == SWITCH:
            continue
        if mine.kind == CA and peer.kind == ROUTER:
            continue
        width, speed = entry.rate
        if speed == UNKNOWN or width == "??":
            width, speed = _known(entry.rate, back.rate)
        links.append(
            ordered_link(
                (
                    (mine.kind, guid, port, entry.lid),
                    (peer.kind, peer_guid, peer_port, back.lid),
                ),
                width,
                speed,
            )
        )
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise FabricFormatError(f"cut short or incomplete: {problems[0]}{more}")
    return links


def _known(mine: tuple[str, str], theirs: tuple[str, str]) -> tuple[str, str]:
    width = mine[0] if mine[0] != "??" else theirs[0]
    speed = mine[1] if mine[1] != UNKNOWN else theirs[1]
    return width, speed
