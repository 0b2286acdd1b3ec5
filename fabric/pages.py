"""Reads for the fabric pages: the figure's facts, a switch's ports, a server's cables and
labels, the overview's card. A fixed number of queries per fabric whatever its size; at
switch level and above the figure reads aggregates summed by the database, never a cable
one by one (and the page reads that figure as stored at its revision: `fabric.render`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, F, Q, Sum
from django.urls import reverse

from findings.choices import FindingType
from findings.models import Finding
from inventory.models import Server

from . import binding
from .choices import LinkState
from .figures import (
    DEGRADED,
    DETAIL,
    DOWN,
    GONE,
    UP,
    CableMark,
    FabricFigureFacts,
    HostMark,
    LeafLoad,
    SwitchMark,
    TrunkBundle,
    level_for,
    merge_bundles,
)
from .models import Fabric, FabricLink, Switch
from .selectors import fabric_server_labels
from .services import host_key


def fabrics_degraded_keys(names: list[str]) -> dict[str, set[str]]:
    """Fabric name -> its cables with an open "slower or narrower than its peers" finding,
    for the fabrics named (one query): the figure marks what the findings say, so the two
    never disagree."""
    found: dict[str, set[str]] = defaultdict(set)
    if not names:
        return found
    of_these = Q()
    for name in names:
        of_these |= Q(subject__startswith=f"fabric:{name}/link:")
    for subject in Finding.objects.filter(
        of_these, type=FindingType.FABRIC_LINK_DEGRADED, resolved_at__isnull=True
    ).values_list("subject", flat=True):
        name, _, key = subject[len("fabric:") :].partition("/link:")
        found[name].add(key)
    return found


def _state(state: str, key: str, degraded: set[str]) -> str:
    if state != LinkState.UP:
        return DOWN
    return DEGRADED if key in degraded else UP


def _cables(fabric_ids: list[int]):
    """Live cables, and those gone with their fabric's last snapshot whose ends are both
    still there (one filter for any number of fabrics: the snapshot time is joined)."""
    live = Q(gone_at__isnull=True) | (
        Q(gone_at=F("fabric__applied_at"), state=LinkState.UP)
        & (
            Q(b_switch__gone_at__isnull=True, b_switch__isnull=False)
            | Q(b_adapter__gone_at__isnull=True, b_adapter__isnull=False)
        )
    )
    return FabricLink.objects.filter(live, fabric_id__in=fabric_ids, a_switch__isnull=False)


def fabric_figure_facts(fabric: Fabric) -> FabricFigureFacts:
    """What one fabric's figure draws (see `fabric_figures_facts`)."""
    return fabric_figures_facts([fabric])[fabric.pk]


def fabric_figures_facts(
    fabrics: list[Fabric], degraded: dict[str, set[str]] | None = None
) -> dict[int, FabricFigureFacts]:
    """What each fabric's figure draws, read at the detail that figure will show: a fixed
    number of queries whatever the number of fabrics (eight at most: switches, degraded
    cables, cables counted per fabric, then the switch-to-switch and server cables of the
    fabrics drawn in detail, and for those drawn at switch level the leaf loads and the
    switch-to-switch bundles summed in SQL, and the degraded cables among them). A fabric
    drawn at switch level never has its cables read one by one. `degraded` (fabric name ->
    cable keys), when the caller read it already, saves that query."""
    ids = [fabric.pk for fabric in fabrics]
    if not ids:
        return {}
    switches: dict[int, list[SwitchMark]] = {fabric_id: [] for fabric_id in ids}
    for fabric_id, sid, name, guid, override, inferred, rail, group in Switch.objects.filter(
        fabric_id__in=ids, gone_at__isnull=True
    ).values_list(
        "fabric_id", "id", "name", "guid", "tier_override", "tier_inferred", "rail", "leaf_group"
    ):
        switches[fabric_id].append(
            SwitchMark(
                key=f"s{sid}",
                name=name or guid,
                tier=override or inferred,
                rail=rail,
                group=group,
                url=reverse("fabric-switch-detail", args=[sid]),
            )
        )
    if degraded is None:
        degraded = fabrics_degraded_keys([fabric.name for fabric in fabrics])
    slow = {fabric.pk: degraded.get(fabric.name, set()) for fabric in fabrics}
    cables = _cables(ids)
    counted = {
        row["fabric_id"]: (row["edge"], row["trunks"])
        for row in cables.order_by()
        .values("fabric_id")
        .annotate(
            edge=Count("id", filter=Q(b_switch__isnull=True)),
            trunks=Count("id", filter=Q(b_switch__isnull=False)),
        )
    }
    detail = [
        fabric_id
        for fabric_id in ids
        if level_for(len(switches[fabric_id]), *_marks(counted.get(fabric_id, (0, 0)))) == DETAIL
    ]
    folded = [fabric_id for fabric_id in ids if fabric_id not in detail]
    edge = cables.filter(b_switch__isnull=True)
    trunks = _trunks(cables.filter(fabric_id__in=detail), slow) if detail else {}
    hosts, marks = _host_cables(edge.filter(fabric_id__in=detail), slow) if detail else ({}, {})
    loads: dict[int, dict[str, LeafLoad]] = {}
    bundles: dict[int, list[TrunkBundle]] = {}
    if folded:
        loads, bundles = _switch_level_facts(cables.filter(fabric_id__in=folded), slow)
    return {
        fabric.pk: (
            FabricFigureFacts(
                fabric.name,
                switches[fabric.pk],
                list(hosts.get(fabric.pk, {}).values()),
                trunks.get(fabric.pk, []) + marks.get(fabric.pk, []),
            )
            if fabric.pk in detail
            else FabricFigureFacts(
                fabric.name,
                switches[fabric.pk],
                leaf_loads=loads.get(fabric.pk, {}),
                bundles=bundles.get(fabric.pk, []),
            )
        )
        for fabric in fabrics
    }


def _marks(counts: tuple[int, int]) -> tuple[int, int]:
    """(server cables, switch-to-switch cables) -> (servers at most, cables) for `level_for`."""
    edge, trunks = counts
    return edge, edge + trunks


def _trunks(cables, degraded: dict[int, set[str]]) -> dict[int, list[CableMark]]:
    """Per fabric: every switch-to-switch cable (one query)."""
    trunks: dict[int, list[CableMark]] = defaultdict(list)
    for fabric_id, a, b, key, width, speed, gbps, state, gone in cables.filter(
        b_switch__isnull=False
    ).values_list(
        "fabric_id",
        "a_switch_id",
        "b_switch_id",
        "key",
        "width",
        "lane_speed",
        "gbps",
        "state",
        "gone_at",
    ):
        trunks[fabric_id].append(
            CableMark(
                a=f"s{a}",
                b=f"s{b}",
                speed=f"{width}{speed}",
                gbps=gbps,
                state=GONE if gone else _state(state, key, degraded[fabric_id]),
            )
        )
    return trunks


def _host_cables(
    edge, degraded: dict[int, set[str]]
) -> tuple[dict[int, dict[str, HostMark]], dict[int, list[CableMark]]]:
    """Per fabric: the servers under its leaves and every cable down to them (one query)."""
    hosts: dict[int, dict[str, HostMark]] = defaultdict(dict)
    marks: dict[int, list[CableMark]] = defaultdict(list)
    for row in edge.filter(Q(b_adapter__isnull=True) | Q(b_adapter__role=binding.HOST)).values_list(
        "fabric_id",
        "a_switch_id",
        "b_adapter_id",
        "b_adapter__server_id",
        "b_adapter__server__hostname",
        "b_adapter__server__rack",
        "b_adapter__host_name",
        "b_adapter__nic",
        "b_adapter__rail",
        "key",
        "width",
        "lane_speed",
        "gbps",
        "state",
        "gone_at",
    ):
        fabric_id, a, adapter, server_id, hostname, rack, host_name, nic, rail, key = row[:10]
        width, speed, gbps, state, gone = row[10:]
        b = ""
        if adapter is not None:
            b = f"h{host_key(server_id, host_name) or f'a{adapter}'}"
            hosts[fabric_id].setdefault(
                b, HostMark(b, hostname or host_name or f"adapter {adapter}", rack or "")
            )
        marks[fabric_id].append(
            CableMark(
                a=f"s{a}",
                b=b,
                speed=f"{width}{speed}",
                gbps=gbps,
                state=GONE if gone else _state(state, key, degraded[fabric_id]),
                rail=rail,
                label=nic,
            )
        )
    return hosts, marks


def _switch_level_facts(
    cables, degraded: dict[int, set[str]]
) -> tuple[dict[int, dict[str, LeafLoad]], dict[int, list[TrunkBundle]]]:
    """Per fabric: each leaf's load (servers, cables and Gb/s down to servers, ports down,
    cables degraded) and the switch-to-switch cables summed per pair of switches
    (`figures.trunk_bundles` in SQL), in three queries: the cables are grouped by the
    database, never read one by one."""
    up = Q(state=LinkState.UP, gone_at__isnull=True)
    edge = cables.filter(b_switch__isnull=True)
    rows = (
        edge.order_by()
        .values("fabric_id", "a_switch_id")
        .annotate(
            servers=Count(
                "b_adapter__host_name", filter=up & Q(b_adapter__isnull=False), distinct=True
            ),
            cables=Count("id", filter=up & Q(b_adapter__isnull=False)),
            gbps=Sum("gbps", filter=up & Q(b_adapter__isnull=False)),
            down=Count("id", filter=~(up & Q(b_adapter__isnull=False))),
        )
    )
    pairs = (
        cables.filter(b_switch__isnull=False)
        .order_by()
        .values("fabric_id", "a_switch_id", "b_switch_id")
        .annotate(up=Count("id", filter=up), gbps=Sum("gbps", filter=up), all=Count("id"))
    )
    slow_leaves: Counter[int] = Counter()
    slow_pairs: Counter[tuple[int, int, int]] = Counter()
    keys = set().union(*degraded.values())
    if keys:
        for fabric_id, a, b, key in cables.filter(up, key__in=keys).values_list(
            "fabric_id", "a_switch_id", "b_switch_id", "key"
        ):
            if key not in degraded.get(fabric_id, ()):
                continue
            if b is None:
                slow_leaves[a] += 1
            else:
                slow_pairs[fabric_id, a, b] += 1
    loads: dict[int, dict[str, LeafLoad]] = defaultdict(dict)
    for r in rows:
        loads[r["fabric_id"]][f"s{r['a_switch_id']}"] = LeafLoad(
            r["servers"], r["cables"], r["gbps"] or 0.0, r["down"], slow_leaves[r["a_switch_id"]]
        )
    parts: dict[int, list[TrunkBundle]] = defaultdict(list)
    for r in pairs:
        fabric_id, a, b = r["fabric_id"], r["a_switch_id"], r["b_switch_id"]
        parts[fabric_id].append(
            TrunkBundle(
                f"s{a}",
                f"s{b}",
                cables=r["up"],
                gbps=r["gbps"] or 0.0,
                down=r["all"] - r["up"],
                degraded=slow_pairs[fabric_id, a, b],
            )
        )
    return loads, {fabric_id: merge_bundles(found) for fabric_id, found in parts.items()}


# -- a switch ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PortRow:
    port: int
    port_name: str
    peer: str
    peer_port: int | None
    peer_url: str
    speed: str
    gbps: float | None
    state: str
    rail: int | None


def switch_ports(switch: Switch) -> list[PortRow]:
    """Every live port of a switch, both ends' sides of the cable (one query)."""
    rows = (
        FabricLink.objects.filter(Q(a_switch=switch) | Q(b_switch=switch), gone_at__isnull=True)
        .select_related("a_switch", "b_switch", "b_adapter__server")
        .order_by("a_port")
    )
    ports = []
    for link in rows:
        if link.a_switch_id == switch.pk:
            port, peer_port = link.a_port, link.b_port
            port_name = link.a_port_name
            if link.b_switch is not None:
                peer = str(link.b_switch)
                url = reverse("fabric-switch-detail", args=[link.b_switch_id])
            elif link.b_adapter is not None:
                server = link.b_adapter.server
                nic = f" {link.b_adapter.nic}" if link.b_adapter.nic else ""
                peer = (server.hostname if server else str(link.b_adapter)) + nic
                url = reverse("server-detail", args=[server.pk]) if server else ""
            else:
                peer, url = "", ""
            rail = link.b_adapter.rail if link.b_adapter else None
        else:
            port, peer_port = link.b_port or 0, link.a_port
            port_name = ""
            peer = str(link.a_switch)
            url = reverse("fabric-switch-detail", args=[link.a_switch_id])
            rail = None
        ports.append(
            PortRow(port, port_name, peer, peer_port, url, link.speed, link.gbps, link.state, rail)
        )
    return sorted(ports, key=lambda p: (p.port, p.port_name))


# -- a server ---------------------------------------------------------------------------


@dataclass
class ServerFabric:
    fabric: str
    nics: list[dict] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)


def server_fabric(server_id: int) -> list[ServerFabric]:
    """Each NIC of a server on each fabric: switch, port, rail, speed; and the node labels a
    Kubernetes scheduler could use for the switch tiers, as its node's page gives them
    (`selectors.fabric_server_labels`). One query, three more per fabric."""
    rows = (
        FabricLink.objects.filter(
            b_adapter__server_id=server_id,
            b_adapter__gone_at__isnull=True,
            gone_at__isnull=True,
            a_switch__isnull=False,
        )
        .select_related("fabric", "a_switch", "b_adapter")
        .only(
            "fabric__name",
            "a_switch__name",
            "a_switch__guid",
            "a_port",
            "a_port_name",
            "b_adapter__nic",
            "b_adapter__guid",
            "b_adapter__rail",
            "width",
            "lane_speed",
            "gbps",
            "state",
        )
        .order_by("fabric__name", "b_adapter__nic", "b_adapter__guid")
    )
    found: dict[int, ServerFabric] = {}
    fabrics: dict[int, Fabric] = {}
    for link in rows:
        entry = found.setdefault(link.fabric_id, ServerFabric(link.fabric.name))
        fabrics[link.fabric_id] = link.fabric
        entry.nics.append(
            {
                "nic": link.b_adapter.nic or link.b_adapter.guid,
                "switch": str(link.a_switch),
                "switch_id": link.a_switch_id,
                "port": link.a_port_name or link.a_port,
                "rail": link.b_adapter.rail,
                "speed": link.speed,
                "gbps": link.gbps,
                "state": link.state,
            }
        )
    for fabric_id, entry in found.items():
        entry.labels = fabric_server_labels(fabrics[fabric_id], server_id).get(server_id, {})
    return list(found.values())


# -- the overview's card ---------------------------------------------------------------


@dataclass
class FabricCard:
    name: str
    switches: int
    cables: int
    ports_down: int
    by_model: list[tuple[str, int, float | None]]
    """(server model, servers, Gb/s per GPU) for the bound servers on the fabric."""


def fabric_cards() -> list[FabricCard]:
    """Per fabric: switch, cable and down-port counts of its last snapshot, and network
    bandwidth per GPU by server model, for the bound servers on it. Four queries, whatever
    the number of fabrics."""
    fabrics = list(
        Fabric.objects.select_related("last_snapshot").only(
            "name",
            "last_snapshot__switch_count",
            "last_snapshot__link_count",
            "last_snapshot__ports_down",
        )
    )
    host_cables = FabricLink.objects.filter(
        gone_at__isnull=True,
        state=LinkState.UP,
        b_adapter__server__isnull=False,
        b_adapter__gone_at__isnull=True,
    )
    gbps: dict[tuple[int, str], float] = {
        (row["fabric_id"], row["b_adapter__server__product"]): row["gbps"] or 0.0
        for row in host_cables.order_by()
        .values("fabric_id", "b_adapter__server__product")
        .annotate(gbps=Sum("gbps"))
    }
    members = list(
        host_cables.order_by()
        .values_list("fabric_id", "b_adapter__server_id", "b_adapter__server__product")
        .distinct()
    )
    gpus = dict(
        Server.objects.filter(id__in={server_id for _, server_id, _ in members})
        .annotate(n=Count("gpus"))
        .values_list("id", "n")
    )
    servers: dict[tuple[int, str], int] = defaultdict(int)
    gpu_count: dict[tuple[int, str], int] = defaultdict(int)
    for fabric_id, server_id, product in members:
        servers[(fabric_id, product)] += 1
        gpu_count[(fabric_id, product)] += gpus.get(server_id, 0)
    cards = []
    for fabric in fabrics:
        snapshot = fabric.last_snapshot
        by_model = [
            (
                product or "unknown model",
                servers[(fabric_id, product)],
                total / gpu_count[(fabric_id, product)]
                if gpu_count[(fabric_id, product)]
                else None,
            )
            for (fabric_id, product), total in sorted(gbps.items(), key=lambda i: i[0][1] or "")
            if fabric_id == fabric.pk
        ]
        cards.append(
            FabricCard(
                fabric.name,
                snapshot.switch_count if snapshot else 0,
                snapshot.link_count if snapshot else 0,
                snapshot.ports_down if snapshot else 0,
                by_model,
            )
        )
    return cards
