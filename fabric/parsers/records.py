"""What an InfiniBand discovery says, as plain data: nodes (switches, channel adapters,
routers), their ports, and the cables between ports. No Django here.

GUIDs are 16 lower-case hex digits without `0x` (the form ibnetdiscover prints in node
names like `"S-2c5eab0300b87b40"`), so they compare as strings and fit any database (a GUID
does not fit PostgreSQL's signed bigint).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SWITCH = "switch"
CA = "ca"
ROUTER = "router"

# Nominal signalling rate of one lane in Gb/s, by the name ibnetdiscover prints. A `4x`
# link has four lanes: 4xEDR is 100 Gb/s, 4xHDR 200, 4xNDR 400.
LANE_GBPS: dict[str, float] = {
    "SDR": 2.5,
    "DDR": 5.0,
    "QDR": 10.0,
    "FDR10": 10.0,
    "FDR": 14.0,
    "EDR": 25.0,
    "HDR": 50.0,
    "NDR": 100.0,
    "XDR": 200.0,
}
UNKNOWN = "???"


class FabricFormatError(ValueError):
    """Input that is not a complete ibnetdiscover output (or node-name map); says why."""


def lanes(width: str) -> int | None:
    """`4x` -> 4; `??` (the tool did not know) -> None."""
    digits = width[:-1] if width.endswith("x") else ""
    return int(digits) if digits.isdigit() else None


def link_gbps(width: str, speed: str) -> float | None:
    """The link's nominal rate in Gb/s, or None when width or speed is unknown (`???`)."""
    count = lanes(width)
    rate = LANE_GBPS.get(speed)
    if count is None or rate is None:
        return None
    return count * rate


GUID_SPELLING = re.compile(r"^(?:(?:0x|[hsr]-)0*([0-9a-f]{1,16})|([0-9a-f]{16}))$", re.IGNORECASE)


def guid_of(text: str) -> str | None:
    """A GUID as people and the tools spell it -> 16 lower-case hex digits; None otherwise.

    The one rule for GUID spellings (node-name maps, a site's topology.conf): `0x<hex>`,
    ibnetdiscover's node ids `H-<hex>` (adapter), `S-<hex>` (switch), `R-<hex>` (router),
    prefixes in either case, with leading zeros dropped or not; or 16 bare hex digits, as
    ibnetdiscover prints a GUID. A shorter bare word is not a GUID (`cafe01` is a host
    name), nor is anything past 64 bits.
    """
    m = GUID_SPELLING.match(text.strip())
    if m is None:
        return None
    return (m[1] or m[2]).lower().rjust(16, "0")


@dataclass(slots=True)
class DiscoveredNode:
    """One switch, channel adapter (CA) or router, keyed by its node GUID.

    In the ports report (`ibnetdiscover -p`) a CA is known only by its port GUIDs, so each
    CA port stands alone there with its port GUID as `guid` (`node_guid_known` False).
    """

    guid: str
    kind: str
    description: str = ""
    port_count: int | None = None
    lid: int | None = None  # a switch's port-0 LID (all its ports answer to it)
    system_guid: str | None = None
    port_guids: dict[int, str] = field(default_factory=dict)
    port_lids: dict[int, int] = field(default_factory=dict)
    node_guid_known: bool = True
    described: bool = True  # False: known only as the far end of a port line


@dataclass(frozen=True, slots=True)
class DiscoveredLink:
    """A cable between two ports, or (b_guid None) a port with nothing up at its far end.

    End `a` is a switch whenever the cable touches one; between two nodes of a kind, the
    lower GUID (then port) comes first, so the same cable always has the same key.
    """

    a_guid: str
    a_port: int
    a_lid: int | None
    b_guid: str | None
    b_port: int | None
    b_lid: int | None
    width: str
    speed: str

    @property
    def key(self) -> str:
        if self.b_guid is None:
            return f"{self.a_guid}/{self.a_port}"
        return f"{self.a_guid}/{self.a_port}-{self.b_guid}/{self.b_port}"

    @property
    def up(self) -> bool:
        return self.b_guid is not None

    @property
    def gbps(self) -> float | None:
        return link_gbps(self.width, self.speed) if self.up else None


@dataclass(slots=True)
class Discovery:
    """A whole ibnetdiscover output: every node and every cable (or idle port) it names."""

    format: str
    nodes: dict[str, DiscoveredNode]
    links: list[DiscoveredLink]
    initiated_from: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def switches(self) -> list[DiscoveredNode]:
        return [n for n in self.nodes.values() if n.kind == SWITCH]

    @property
    def adapters(self) -> list[DiscoveredNode]:
        return [n for n in self.nodes.values() if n.kind != SWITCH]


KIND_ORDER = {SWITCH: 0, ROUTER: 1, CA: 2}


def ordered_link(
    ends: tuple[tuple[str, str, int, int | None], tuple[str, str, int, int | None]],
    width: str,
    speed: str,
) -> DiscoveredLink:
    """A link with its ends in canonical order; each end is (kind, guid, port, lid)."""
    first, second = sorted(ends, key=lambda end: (KIND_ORDER[end[0]], end[1], end[2]))
    return DiscoveredLink(
        a_guid=first[1],
        a_port=first[2],
        a_lid=first[3],
        b_guid=second[1],
        b_port=second[2],
        b_lid=second[3],
        width=width,
        speed=speed,
    )
