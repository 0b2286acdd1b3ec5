"""Reads for some servers on the fabric (a workload's): the fabric most of them are cabled
to, their cables to its leaves, and the leaves' cables up to the spines above them.

Three queries whatever the fabric's or the fleet's size (one when no server is cabled): the
servers' cables with their leaves joined, the switch-to-switch cables of those leaves with
both ends joined, and the cables the open findings call degraded (so the figure marks what
the findings say, as the fabric figure does).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.urls import reverse

from .. import binding
from ..figures import GONE, CableMark, FabricFigureFacts, HostMark, SwitchMark
from ..figures_servers import ServersOnFabric
from ..models import FabricLink
from .figure import _state, fabrics_degraded_keys


def _switch_fields(end: str) -> dict:
    """The values() of one end's switch, named `<end>_<field>`."""
    return {
        f"{end}_id": F(f"{end}_switch_id"),
        f"{end}_name": F(f"{end}_switch__name"),
        f"{end}_guid": F(f"{end}_switch__guid"),
        f"{end}_tier": Coalesce(f"{end}_switch__tier_override", f"{end}_switch__tier_inferred"),
        f"{end}_rail": F(f"{end}_switch__rail"),
        f"{end}_leaf_group": F(f"{end}_switch__leaf_group"),
    }


def _mark(row: Mapping, end: str) -> SwitchMark:
    sid = row[f"{end}_id"]
    return SwitchMark(
        key=f"s{sid}",
        name=row[f"{end}_name"] or row[f"{end}_guid"],
        tier=row[f"{end}_tier"],
        rail=row[f"{end}_rail"],
        group=row[f"{end}_leaf_group"],
        url=reverse("fabric-switch-detail", args=[sid]),
    )


def servers_on_fabric(gpus: Mapping[int, int]) -> ServersOnFabric | None:
    """Server id -> GPUs held there, to what `fabric.figures_servers` draws of them; None
    when none of the servers is cabled to a fabric. Servers on several fabrics: the fabric
    most of them are on (then by name), the others counted in `elsewhere`."""
    if not gpus:
        return None
    live = Q(gone_at__isnull=True)
    rows: list[Mapping[str, Any]] = list(
        FabricLink.objects.filter(
            live,
            a_switch__isnull=False,
            a_switch__gone_at__isnull=True,
            b_adapter__server_id__in=list(gpus),
            b_adapter__role=binding.HOST,
            b_adapter__gone_at__isnull=True,
        )
        .order_by()
        .values(
            "fabric_id",
            "fabric__name",
            "key",
            "a_port",
            "width",
            "lane_speed",
            "gbps",
            "state",
            "gone_at",
            "b_adapter__server_id",
            "b_adapter__server__hostname",
            "b_adapter__server__rack",
            "b_adapter__nic",
            "b_adapter__rail",
            "b_adapter__nic_rail",
            **_switch_fields("a"),
        )
    )
    if not rows:
        return None
    servers_per_fabric = Counter(
        name for name, _ in {(r["fabric__name"], r["b_adapter__server_id"]) for r in rows}
    )
    name = min(servers_per_fabric, key=lambda n: (-servers_per_fabric[n], n))
    rows = [r for r in rows if r["fabric__name"] == name]
    fabric_id = rows[0]["fabric_id"]
    degraded = fabrics_degraded_keys([name]).get(name, set())
    switches = {f"s{r['a_id']}": _mark(r, "a") for r in rows}
    hosts: dict[str, HostMark] = {}
    cables: list[CableMark] = []
    for r in rows:
        host = f"hs{r['b_adapter__server_id']}"
        hosts.setdefault(
            host, HostMark(host, r["b_adapter__server__hostname"], r["b_adapter__server__rack"])
        )
        cables.append(
            CableMark(
                a=f"s{r['a_id']}",
                b=host,
                speed=f"{r['width']}{r['lane_speed']}",
                gbps=r["gbps"],
                state=GONE if r["gone_at"] else _state(r["state"], r["key"], degraded),
                rail=r["b_adapter__rail"],
                label=r["b_adapter__nic"],
                nic_rail=r["b_adapter__nic_rail"],
                port=r["a_port"],
            )
        )
    leaves = set(switches)
    trunks: list[Mapping[str, Any]] = list(
        FabricLink.objects.filter(
            live,
            Q(a_switch_id__in=[int(k[1:]) for k in leaves])
            | Q(b_switch_id__in=[int(k[1:]) for k in leaves]),
            fabric_id=fabric_id,
            a_switch__gone_at__isnull=True,
            b_switch__gone_at__isnull=True,
            b_switch__isnull=False,
        )
        .order_by()
        .values(
            "key",
            "width",
            "lane_speed",
            "gbps",
            "state",
            **_switch_fields("a"),
            **_switch_fields("b"),
        )
    )
    for r in trunks:
        a, b = _mark(r, "a"), _mark(r, "b")
        low, high = sorted((a, b), key=lambda s: s.tier or 1)
        if low.key not in leaves or (high.tier or 1) <= (low.tier or 1):
            continue  # between two leaves, or above the spines
        switches.setdefault(high.key, high)
        cables.append(
            CableMark(
                a=a.key,
                b=b.key,
                speed=f"{r['width']}{r['lane_speed']}",
                gbps=r["gbps"],
                state=_state(r["state"], r["key"], degraded),
            )
        )
    return ServersOnFabric(
        facts=FabricFigureFacts(name, list(switches.values()), list(hosts.values()), cables),
        gpus={f"hs{server_id}": count for server_id, count in gpus.items()},
        elsewhere=len(set(gpus) - {int(key[2:]) for key in hosts}),
    )
