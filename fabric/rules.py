"""Fabric findings as small pure rules: plain facts in, finding facts out. Nothing is stored
here; whoever keeps findings (the findings layer) persists these by (type, subject).

`FindingFact` is the one finding shape of the project, and `FindingType`'s fabric family the
types these rules raise (findings/).
Each rule answers one question in plain language and names the server where there is one.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from statistics import median

from findings.choices import FindingType, Severity
from findings.facts import FindingFact

from .exports import SchedulerTree, names_of
from .parsers.records import guid_of, lanes

FabricFinding = FindingFact
"""The one finding shape every rule family returns, by the name fabric's callers use."""


@dataclass(frozen=True, slots=True)
class LinkFact:
    """A cable as the rules see it: its ends by name, rate, and whether it joins two switches."""

    key: str
    a_name: str
    a_port: int
    b_name: str
    b_port: int | None
    width: str
    speed: str
    gbps: float | None
    between_switches: bool
    server_id: int | None = None

    @property
    def label(self) -> str:
        far = f"{self.b_name} port {self.b_port}" if self.b_port is not None else "nothing"
        return f"{self.a_name} port {self.a_port} to {far}"


def degraded_links(fabric: str, links: Iterable[LinkFact]) -> list[FabricFinding]:
    """A cable slower or narrower than its peers (an HDR link on an NDR fabric, a 1x link).

    Peers are the up cables of the same class (switch-to-switch, or switch-to-adapter);
    their rate is the one most of them run at, and only a clear majority (more than half)
    sets it. Cables whose rate the tool did not know (`???`) are not judged.
    """
    classes: dict[bool, list[LinkFact]] = defaultdict(list)
    for link in links:
        if link.gbps is not None and link.b_port is not None:
            classes[link.between_switches].append(link)
    found = []
    for between, members in classes.items():
        counts = Counter((m.width, m.speed) for m in members)
        (width, speed), count = counts.most_common(1)[0]
        if count * 2 <= len(members):
            continue
        expected = next(m for m in members if (m.width, m.speed) == (width, speed))
        for link in members:
            narrower = (lanes(link.width) or 0) < (lanes(width) or 0)
            slower = (link.gbps or 0) < (expected.gbps or 0)
            if not (narrower or slower):
                continue
            what = "narrower" if narrower else "slower"
            kind = "switch-to-switch" if between else "server"
            found.append(
                FabricFinding(
                    type=FindingType.FABRIC_LINK_DEGRADED,
                    severity=Severity.WARNING,
                    subject=f"fabric:{fabric}/link:{link.key}",
                    message=(
                        f"{link.label} runs at {link.width}{link.speed} ({link.gbps:g} Gb/s), "
                        f"{what} than the {width}{speed} ({expected.gbps:g} Gb/s) of "
                        f"{count} other {kind} cables"
                    ),
                    server_id=link.server_id,
                    details={
                        "rate": f"{link.width}{link.speed}",
                        "gbps": link.gbps,
                        "peer_rate": f"{width}{speed}",
                        "peer_gbps": expected.gbps,
                    },
                )
            )
    return found


def ports_gone(fabric: str, gone: Iterable[LinkFact]) -> list[FabricFinding]:
    """A port that was up in the previous snapshot and is not up in the last one."""
    return [
        FabricFinding(
            type=FindingType.FABRIC_PORT_GONE,
            severity=Severity.WARNING,
            subject=f"fabric:{fabric}/link:{link.key}",
            message=f"{link.label} was up in the previous snapshot and is gone from the last",
            server_id=link.server_id,
            details={"rate": f"{link.width}{link.speed}"},
        )
        for link in gone
    ]


@dataclass(frozen=True, slots=True)
class RailFact:
    adapter: str
    host: str
    nic: str
    nic_rail: int
    leaf_name: str
    leaf_rail: int | None
    server_id: int | None = None


def wrong_rail(fabric: str, nics: Iterable[RailFact]) -> list[FabricFinding]:
    """A server NIC cabled to a leaf of another rail (NIC k belongs on rail k's leaf).

    Only hosts that follow the rails at least half-way are judged: a management or storage
    server with a couple of NICs on rail leaves (UFM hosts in the SuperPOD capture) is on no
    rail, and naming all its NICs "wrong" would be noise.
    """
    hosts: dict[str, list[RailFact]] = defaultdict(list)
    for nic in nics:
        if nic.leaf_rail is not None:
            hosts[nic.host].append(nic)
    found = []
    for members in hosts.values():
        right = sum(1 for nic in members if nic.nic_rail == nic.leaf_rail)
        if right * 2 < len(members):
            continue
        found += [
            FabricFinding(
                type=FindingType.FABRIC_WRONG_RAIL,
                severity=Severity.WARNING,
                subject=f"fabric:{fabric}/adapter:{nic.adapter}",
                message=(
                    f"{nic.host} {nic.nic} belongs on rail {nic.nic_rail} but is cabled to "
                    f"{nic.leaf_name}, a leaf of rail {nic.leaf_rail}"
                ),
                server_id=nic.server_id,
                details={"rail": nic.nic_rail, "leaf": nic.leaf_name, "leaf_rail": nic.leaf_rail},
            )
            for nic in members
            if nic.nic_rail != nic.leaf_rail
        ]
    return found


def _spread(
    groups: dict[str, list[str]], placed: dict[str, str]
) -> Iterator[tuple[str, list[str], dict[str, list[str]]]]:
    """Each group (a leaf or a switch of one tree) whose nodes the other tree (`placed`: node ->
    its group there) puts in more than one place: (group, its nodes, place -> its nodes,
    sorted). Nodes the other tree does not have are left out."""
    for group, names in groups.items():
        places: dict[str, list[str]] = defaultdict(list)
        for name in names:
            if name in placed:
                places[placed[name]].append(name)
        if len(places) > 1:
            yield group, names, {place: sorted(ns) for place, ns in places.items()}


def scheduler_topology_mismatch(
    cluster: str, scheduler: SchedulerTree, discovered: SchedulerTree
) -> list[FabricFinding]:
    """Where a scheduler's tree (a pushed topology.conf) and the discovered one disagree.

    Switch names differ between the two by nature, so leaves are compared by the nodes they
    hold: a scheduler leaf whose nodes sit on several real leaves, real leaf-mates spread
    over several scheduler leaves, nodes on the fabric the scheduler leaves out, and nodes
    the scheduler places that the fabric does not have.
    """
    found: list[FabricFinding] = []
    real = {name: leaf for leaf, names in discovered.nodes.items() for name in names}
    told = {name: leaf for leaf, names in scheduler.nodes.items() for name in names}
    subject = f"cluster:{cluster}/topology"

    # Both directions, one comparison: a scheduler switch whose nodes sit on several real
    # leaves, a real leaf whose nodes the scheduler spreads over several switches.
    directions = (
        ("switch", scheduler.nodes, real, "leaves"),
        ("leaf", discovered.nodes, told, "switches"),
    )
    for kind, groups, placed, places_kind in directions:
        for group, names, places in _spread(groups, placed):
            where = "; ".join(f"{p}: {names_of(ns)}" for p, ns in sorted(places.items()))
            if kind == "switch":
                message = (
                    f"{cluster}'s switch {group} holds nodes that sit on "
                    f"{len(places)} different leaves ({where})"
                )
            else:
                message = (
                    f"{names_of(names)} share leaf {group}, but {cluster} spreads them "
                    f"over {len(places)} switches ({where})"
                )
            found.append(
                FabricFinding(
                    type=FindingType.FABRIC_TOPOLOGY_MISMATCH,
                    severity=Severity.WARNING,
                    subject=f"{subject}/{kind}:{group}",
                    message=message,
                    details={kind: group, places_kind: places},
                )
            )
    missing = sorted(set(real) - set(told))
    if missing:
        found.append(
            FabricFinding(
                type=FindingType.FABRIC_TOPOLOGY_MISMATCH,
                severity=Severity.WARNING,
                subject=f"{subject}/missing",
                message=(
                    f"{len(missing)} node(s) on the fabric are under no switch in {cluster}'s "
                    f"topology: {names_of(missing)}"
                ),
                details={"nodes": missing},
            )
        )
    unknown = sorted(set(told) - set(real))
    if unknown:
        guids = [n for n in unknown if guid_of(n) is not None]
        names = [n for n in unknown if guid_of(n) is None]
        parts: list[str] = []
        if names:
            parts.append(f"{len(names)} node(s) the fabric does not show: {names_of(names)}")
        if guids:
            parts.append(
                f"{len(guids)} GUID(s) no host adapter on the fabric carries: {', '.join(guids)}"
            )
        found.append(
            FabricFinding(
                type=FindingType.FABRIC_TOPOLOGY_MISMATCH,
                severity=Severity.INFO,
                subject=f"{subject}/unknown",
                message=f"{cluster}'s topology places {'; and '.join(parts)}",
                details={"nodes": unknown},
            )
        )
    return found


def scheduler_guid_names(
    cluster: str, scheduler: SchedulerTree, adapters: Mapping[str, tuple[str, str]]
) -> tuple[SchedulerTree, list[FabricFinding]]:
    """A site's tree with the node names that spell a GUID (`records.guid_of`: `0x...`,
    16 bare hex digits, `H-...`) read as the fabric knows those adapters.

    `adapters` maps every node and port GUID of the fabric's host adapters to (the
    adapter's GUID, the name the fabric lists it by, "" when it knows it by GUID alone).
    An adapter known by GUID alone becomes `0x<its GUID>`, as the discovered tree lists it;
    one the fabric names becomes that name, with an INFO finding that the file names it by
    GUID. A GUID no host adapter carries stays as written (the compare says so).
    """
    by_name: dict[str, str] = {}

    def read(name: str) -> str:
        guid = guid_of(name)
        if guid is None or guid not in adapters:
            return name
        adapter, known_as = adapters[guid]
        if known_as:
            by_name[name] = known_as
            return known_as
        return f"0x{adapter}"

    tree = SchedulerTree(
        nodes={
            switch: sorted({read(name) for name in names})
            for switch, names in scheduler.nodes.items()
        },
        children=dict(scheduler.children),
    )
    found = []
    if by_name:
        pairs = ", ".join(f"{g} is {n}" for g, n in sorted(by_name.items()))
        found.append(
            FabricFinding(
                type=FindingType.FABRIC_TOPOLOGY_MISMATCH,
                severity=Severity.INFO,
                subject=f"cluster:{cluster}/topology/by-guid",
                message=(
                    f"{cluster}'s topology names {len(by_name)} node(s) by the GUID of an "
                    f"adapter the fabric knows by name: {pairs}"
                ),
                details={"nodes": dict(sorted(by_name.items()))},
            )
        )
    return tree, found


@dataclass(frozen=True, slots=True)
class ServerFact:
    """A GPU server: its peer group (same product and GPUs), whether it is on the fabric, and
    its network bandwidth per GPU there."""

    server_id: int
    hostname: str
    peers: str
    on_fabric: bool
    gbps_per_gpu: float | None = None


def servers_absent(fabric: str, servers: Iterable[ServerFact]) -> list[FabricFinding]:
    """A GPU server absent from a fabric most of its peers (two at least) are on."""
    groups: dict[str, list[ServerFact]] = defaultdict(list)
    for server in servers:
        groups[server.peers].append(server)
    found = []
    for peers, members in groups.items():
        present = [m for m in members if m.on_fabric]
        if len(present) < 2 or len(present) * 2 <= len(members):
            continue
        for server in members:
            if server.on_fabric:
                continue
            found.append(
                FabricFinding(
                    type=FindingType.FABRIC_SERVER_ABSENT,
                    severity=Severity.WARNING,
                    subject=f"fabric:{fabric}/server:{server.hostname}",
                    message=(
                        f"{server.hostname} is not on fabric {fabric}, where {len(present)} of "
                        f"its {len(members) - 1} peers ({peers}) are"
                    ),
                    server_id=server.server_id,
                    details={"peers": peers, "peers_on_fabric": len(present)},
                )
            )
    return found


def servers_unbalanced(
    fabric: str, servers: Iterable[ServerFact], ratio: float = 0.5
) -> list[FabricFinding]:
    """A server with far less network per GPU than its peers (under `ratio` of their median,
    three peers at least)."""
    groups: dict[str, list[ServerFact]] = defaultdict(list)
    for server in servers:
        if server.on_fabric and server.gbps_per_gpu is not None:
            groups[server.peers].append(server)
    found = []
    for peers, members in groups.items():
        if len(members) < 3:
            continue
        # Every member has a rate (grouped above only with one); the filter says so to mypy.
        typical = median(m.gbps_per_gpu for m in members if m.gbps_per_gpu is not None)
        for server in members:
            if server.gbps_per_gpu is not None and server.gbps_per_gpu < typical * ratio:
                found.append(
                    FabricFinding(
                        type=FindingType.FABRIC_SERVER_UNBALANCED,
                        severity=Severity.WARNING,
                        subject=f"fabric:{fabric}/server:{server.hostname}",
                        message=(
                            f"{server.hostname} has {server.gbps_per_gpu:g} Gb/s of network "
                            f"per GPU; its peers ({peers}) have {typical:g}"
                        ),
                        server_id=server.server_id,
                        details={"gbps_per_gpu": server.gbps_per_gpu, "peer_median": typical},
                    )
                )
    return found
