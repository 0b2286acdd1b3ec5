"""`ibnetdiscover -p` (the ports report) -> Discovery. Pure; one pass, one compiled pattern.

One line per port of every node, cabled or not:

    CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - ...
    SW  2052 37 0x506b4b03005c2740 4x ???                                    'ib-i4l1s01'

type, LID (a switch's own LID, a CA port's base LID), port, port GUID, width, speed, then the
far end or, for a port with nothing up behind it, only the node's name. The report names a
CA by its port GUID alone (a node GUID never appears), so each CA port is its own adapter
here. A cable appears once from each end; the second sighting adds nothing. Trimmed reports
(one end of a cable missing) are read as they are: the format has no block to be cut in
two, so only an unfinished last line shows an output cut short.
"""

from __future__ import annotations

import re

from .records import (
    CA,
    LANE_GBPS,
    ROUTER,
    SWITCH,
    UNKNOWN,
    DiscoveredLink,
    DiscoveredNode,
    Discovery,
    FabricFormatError,
    ordered_link,
)

FORMAT = "ibnetdiscover-ports"

KIND_OF_TYPE = {"SW": SWITCH, "CA": CA, "RT": ROUTER}
LINE = re.compile(
    r"^\s*(SW|CA|RT)\s+(\d+)\s+(\d+)\s+0x([0-9a-fA-F]{1,16})\s+(\d+x|\?\?)\s+"
    r"([A-Z][A-Z0-9]*|\?\?\?)"
    r"(?:\s+-\s+(SW|CA|RT)\s+(\d+)\s+(\d+)\s+0x([0-9a-fA-F]{1,16})\s+\( '(.*)' - '(.*)' \)"
    r"|\s+'(.*)')\s*$"
)


def parse_ibnetdiscover_ports(text: str) -> Discovery:
    """Read a whole `ibnetdiscover -p` output; FabricFormatError says why it cannot be."""
    lines = text.split("\n")
    complete_last_line = text.endswith("\n")
    if complete_last_line:
        lines.pop()
    last = len(lines)
    nodes: dict[str, DiscoveredNode] = {}
    cables: dict[str, DiscoveredLink] = {}
    idle: dict[tuple[str, int], DiscoveredLink] = {}
    cabled_ports: set[tuple[str, int]] = set()
    match = LINE.match

    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = match(line)
        if m is None or (
            number == last and not complete_last_line and m[6] != UNKNOWN and m[6] not in LANE_GBPS
        ):
            if number == last and not complete_last_line:
                raise FabricFormatError(
                    f"cut short: the output ends in the middle of line {number}"
                )
            shown = line if len(line) <= 80 else line[:77] + "..."
            raise FabricFormatError(f"line {number} is not ibnetdiscover -p output: {shown!r}")
        kind, lid, port, guid = KIND_OF_TYPE[m[1]], int(m[2]), int(m[3]), _guid(m[4])
        width, speed = m[5], m[6]
        node = _node(nodes, kind, guid, m[11] if m[7] else m[13], described=True)
        if kind == SWITCH:
            node.lid = lid
            node.port_count = max(node.port_count or 0, port)
        else:
            node.port_guids[port] = guid
            node.port_lids[port] = lid
        if not m[7]:
            idle[(guid, port)] = DiscoveredLink(guid, port, lid, None, None, None, width, speed)
            continue
        peer_kind, peer_lid, peer_port = KIND_OF_TYPE[m[7]], int(m[8]), int(m[9])
        peer_guid = _guid(m[10])
        peer = _node(nodes, peer_kind, peer_guid, m[12], described=False)
        if peer_kind == SWITCH:
            peer.lid = peer.lid if peer.lid is not None else peer_lid
        else:
            peer.port_guids.setdefault(peer_port, peer_guid)
            peer.port_lids.setdefault(peer_port, peer_lid)
        link = ordered_link(
            ((kind, guid, port, lid), (peer_kind, peer_guid, peer_port, peer_lid)), width, speed
        )
        known = cables.get(link.key)
        if known is None or (known.speed == UNKNOWN and speed != UNKNOWN):
            cables[link.key] = link
        cabled_ports.update({(guid, port), (peer_guid, peer_port)})

    links = list(cables.values())
    links.extend(link for key, link in idle.items() if key not in cabled_ports)
    return Discovery(format=FORMAT, nodes=nodes, links=links)


def _guid(text: str) -> str:
    return text.lower().rjust(16, "0")


def _node(
    nodes: dict[str, DiscoveredNode], kind: str, guid: str, name: str, *, described: bool
) -> DiscoveredNode:
    node = nodes.get(guid)
    if node is None:
        node = nodes[guid] = DiscoveredNode(
            guid=guid,
            kind=kind,
            description=name,
            node_guid_known=kind == SWITCH,
            described=described,
        )
    elif node.kind != kind:
        raise FabricFormatError(f"{guid} is named both a {node.kind} and a {kind}")
    elif described and not node.described:
        node.description, node.described = name, True
    return node
