"""Reads for the fabric figure: its facts and the cables the open findings call degraded.

A fixed number of queries per fabric whatever its size; at switch level and above the figure
reads aggregates summed by the database, never a cable one by one (and the page reads that
figure as stored at its revision: `fabric.render`).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from django.db.models import Count, F, Q, Sum
from django.urls import reverse

from findings.choices import FindingType
from findings.models import Finding

from .. import binding
from ..choices import LinkState
from ..figures import (
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
from ..graph import host_key
from ..models import Fabric, FabricLink, Switch


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
                rail_optimised=bool((fabric.summary or {}).get("rail_optimised")),
                rail_names=_rail_names(fabric.summary),
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


def _rail_names(summary: object) -> dict[int, str]:
    """Rail -> its NIC labels (`mlx5_0`), from the fabric's summary (`services`)."""
    rails = summary.get("rails", []) if isinstance(summary, dict) else []
    return {
        row["rail"]: "/".join(row.get("nics") or [])
        for row in rails
        if isinstance(row, dict) and isinstance(row.get("rail"), int) and row.get("nics")
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
        "b_adapter__nic_rail",
        "a_port",
        "key",
        "width",
        "lane_speed",
        "gbps",
        "state",
        "gone_at",
    ):
        fabric_id, a, adapter, server_id, hostname, rack, host_name, nic, rail = row[:9]
        nic_rail, port, key, width, speed, gbps, state, gone = row[9:]
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
                nic_rail=nic_rail,
                port=port,
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
