"""What a failure takes with it, read: a server, a rack or a network switch going down.

A server takes its VMs with it (Server.physical_host), and every scheduler node bound to any of
them, in every cluster. A switch takes the servers whose every switched NIC hangs off it; the
servers that keep a path through another switch are listed as degraded, not lost. Capacity is
the schedulers' own figure (`gpu_capacity`), so the share lost per cluster and partition reads
like the scheduler's own numbers; the largest job that still fits uses the placement rules.

Both the failure domain and the fleet ranking read a fixed number of queries, whatever the
fleet's size; the arithmetic on what they read is `arithmetic`, pure.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Count, Q, QuerySet

from clusters.models import Node
from health.selectors import action_rows, annotate_action
from inventory.choices import GpuStatus
from inventory.models import Gpu, MigDevice, Nic, Server

from ..selectors import fleet_counts
from ..service import gc_paused
from .arithmetic import (
    FailureDomainError,
    ServerCables,
    ServerCounts,
    SpineLoss,
    capacity_after,
    fabric_loss_words,
    leaf_loss,
    rank_domains,
    ranking_answer,
    spine_loss,
    spine_losses,
    switch_split,
)

SERVER_FIELDS = ("id", "hostname", "rack", "rack_position", "is_virtual", "physical_host_id")


@gc_paused
def failure_domain(
    *, server: int | None = None, rack: str | None = None, switch: str | None = None
) -> dict[str, Any]:
    """Counts and lists lost if the server, rack or switch fails, and what still fits after.

    Exactly one of server (id), rack (name) or switch (name). Raises FailureDomainError when
    none or several are given; an unknown name is a domain that takes nothing down.
    """
    given = [(k, v) for k, v in (("server", server), ("rack", rack), ("switch", switch)) if v]
    if len(given) != 1:
        raise FailureDomainError("server", "give exactly one of server, rack or switch")
    kind, name = given[0]
    degraded: list[dict[str, Any]] = []
    fabric: dict[str, Any] | None = None
    if kind == "server":
        rows = list(
            Server.objects.filter(Q(pk=server) | Q(physical_host_id=server)).values(*SERVER_FIELDS)
        )
    elif kind == "rack":
        rows = list(
            Server.objects.filter(Q(rack=rack) | Q(physical_host__rack=rack)).values(*SERVER_FIELDS)
        )
    elif str(switch).strip().isdigit():  # a discovered fabric switch, by id
        rows, degraded, fabric = _fabric_switch_servers(int(str(switch).strip()))
    else:  # a switch by the name agents' LLDP and people's locations give
        rows, degraded = _switch_servers(str(switch))
    lost_ids = {r["id"] for r in rows}
    gpu_rows = list(
        annotate_action(Gpu.objects.filter(server_id__in=lost_ids).exclude(status=GpuStatus.LOST))
        .select_related("server")
        .order_by("server_id", "index", "id")
    )
    gpus: list[dict[str, Any]] = [
        {
            "id": g.pk,
            "server_id": g.server_id,
            "index": g.index,
            "uuid": g.uuid,
            "name": g.name,
            "mig_mode_current": g.mig_mode_current,
            "needs_action": action.words if action else None,
        }
        for g, action in zip(gpu_rows, action_rows(gpu_rows), strict=True)
    ]
    migs = list(
        MigDevice.objects.filter(gpu__server_id__in=lost_ids)
        .exclude(gpu__status=GpuStatus.LOST)
        .values("uuid", "gpu_id", "gpu__server_id", "profile")
    )
    fleet = fleet_counts()
    lost_nodes = [
        (node, twin) for node in fleet.nodes for twin in node.identities if twin[2] in lost_ids
    ]
    gpus_by_server: dict[int, int] = defaultdict(int)
    for gpu in gpus:
        gpus_by_server[gpu["server_id"]] += 1
    hostnames = {r["id"]: r["hostname"] for r in rows}
    target: dict[str, Any] = {"kind": kind, "name": str(name), "id": None}
    if kind == "server":
        target.update(id=server, name=hostnames.get(int(server or 0), f"server {server}"))
    if fabric is not None:
        target.update(id=fabric["switch_id"], name=fabric["switch"])
    return {
        "target": target,
        "servers": len(rows),
        "nodes": len(lost_nodes),
        "gpus": len(gpus),
        "gpus_needing_action": sum(1 for g in gpus if g["needs_action"]),
        "mig_devices": len(migs),
        "server_list": [
            {
                "id": r["id"],
                "hostname": r["hostname"],
                "rack": r["rack"],
                "rack_position": r["rack_position"],
                "is_virtual": r["is_virtual"],
                "physical_host": r["physical_host_id"],
                "gpus": gpus_by_server.get(r["id"], 0),
            }
            for r in sorted(rows, key=lambda r: (r["is_virtual"], r["hostname"]))
        ],
        "node_list": [
            {
                "id": node_id,
                "name": name,
                "cluster": n.cluster,
                "kind": n.kind,
                "server": server_id,
                "server_hostname": hostnames.get(server_id or 0, hostname),
                "gpu_capacity": n.gpu_capacity,
                "partitions": n.partitions,
                "state": n.state,
                "state_flags": list(n.state_flags),
            }
            for n, (node_id, name, server_id, hostname) in lost_nodes
        ],
        "gpu_list": [
            {
                "id": g["id"],
                "uuid": g["uuid"],
                "index": g["index"],
                "server": g["server_id"],
                "server_hostname": hostnames.get(g["server_id"], ""),
                "name": g["name"],
                "mig_enabled": bool(g["mig_mode_current"]),
                "needs_action": bool(g["needs_action"]),
                "action_reason": g["needs_action"],
            }
            for g in gpus
        ],
        "mig_device_list": [
            {
                "uuid": m["uuid"],
                "gpu": m["gpu_id"],
                "server": m["gpu__server_id"],
                "profile": m["profile"],
            }
            for m in migs
        ],
        "degraded_servers": degraded,
        "fabric": fabric,
        **capacity_after(fleet, {twin[0] for _, twin in lost_nodes}),
    }


def _switch_servers(switch: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Servers cut off by the switch (all switched NICs on it) and VMs on them; the degraded."""
    on_switch = Nic.objects.filter(switch=switch).values("server_id")
    switches: dict[int, set[str]] = defaultdict(set)
    for server_id, name in (
        Nic.objects.filter(server_id__in=on_switch)
        .exclude(switch="")
        .values_list("server_id", "switch")
    ):
        switches[server_id].add(name)
    cut, partial = switch_split(switches, switch)
    rows = list(
        Server.objects.filter(Q(pk__in=switches) | Q(physical_host_id__in=cut)).values(
            *SERVER_FIELDS
        )
    )
    lost = [r for r in rows if r["id"] in cut or r["physical_host_id"] in cut]
    degraded = [
        {
            "id": r["id"],
            "hostname": r["hostname"],
            "other_switches": sorted(switches[r["id"]] - {switch}),
        }
        for r in rows
        if r["id"] in partial and r["physical_host_id"] not in cut
    ]
    return lost, sorted(degraded, key=lambda d: d["hostname"])


def failure_domain_ranking(*, by: str = "rack", limit: int = 50) -> dict[str, Any]:
    """Racks, physical servers or fabric switches ranked by the GPUs they take down (VMs
    count with their host; a switch, see `fabric_switch_ranking`).

    Racks and servers: four queries (servers, GPU, MIG and node counts per server); switches:
    six. Servers without a rack are counted in `unracked_servers`, not ranked as a rack.
    """
    if by not in ("rack", "server", "switch"):
        raise FailureDomainError("by", "rack, server or switch")
    if by == "switch":
        return fabric_switch_ranking(limit)
    servers = list(Server.objects.values("id", "hostname", "rack", "physical_host_id"))
    return rank_domains(servers, **server_counts()._asdict(), by=by, limit=limit)


def failure_domain_rankings(limit: int = 50) -> dict[str, dict[str, Any]]:
    """The rankings by rack, by server and by switch (the failure tab shows all three), the
    per-server counts read once for the three: seven queries."""
    counts = server_counts()
    servers = list(Server.objects.values("id", "hostname", "rack", "physical_host_id"))
    found = {
        by: rank_domains(servers, **counts._asdict(), by=by, limit=limit)
        for by in ("rack", "server")
    }
    found["switch"] = fabric_switch_ranking(limit, counts)
    return found


def server_counts() -> ServerCounts:
    """Three queries, each one aggregate over the fleet."""
    return ServerCounts(
        gpus=_count_by_server(Gpu.objects.exclude(status=GpuStatus.LOST), "server_id"),
        migs=_count_by_server(
            MigDevice.objects.exclude(gpu__status=GpuStatus.LOST), "gpu__server_id"
        ),
        nodes=_count_by_server(Node.objects.filter(gone_at__isnull=True), "server_id"),
    )


def failure_domain_choices() -> dict[str, list[str]]:
    """Racks and switches that people have entered, for the failure-domain form (2 queries)."""
    racks = Server.objects.exclude(rack="").order_by("rack").values_list("rack", flat=True)
    switches = Nic.objects.exclude(switch="").order_by("switch").values_list("switch", flat=True)
    return {"racks": list(racks.distinct()), "switches": list(switches.distinct())}


def server_resolve(text: str) -> int:
    """A server id from an id or a hostname (case-insensitive); raises FailureDomainError."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    ids = list(Server.objects.filter(hostname__iexact=text).values_list("id", flat=True)[:2])
    if not ids:
        raise FailureDomainError("server", f"no server named {text!r}")
    if len(ids) > 1:
        raise FailureDomainError("server", f"several servers are named {text!r}: give the id")
    return ids[0]


def _count_by_server(queryset: QuerySet, field: str) -> dict[int, int]:
    return dict(
        queryset.order_by().values_list(field).annotate(n=Count("*")).values_list(field, "n")
    )


# -- the discovered fabric: what a fabric switch takes, read ----------------------------------


def _fabric_switch_servers(
    switch_id: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """The servers a discovered fabric switch cuts off and degrades, and what it takes, in
    words and numbers (four queries at most)."""
    from fabric.models import FabricLink, Switch

    switch = (
        Switch.objects.filter(pk=switch_id, gone_at__isnull=True)
        .select_related("fabric")
        .only("id", "name", "guid", "tier_override", "tier_inferred", "fabric__name")
        .first()
    )
    if switch is None:
        raise FailureDomainError("switch", f"no fabric switch {switch_id}")
    live = FabricLink.objects.filter(fabric_id=switch.fabric_id, gone_at__isnull=True, state="up")
    name = str(switch)
    tier = switch.tier
    leaf = spine = None
    rows: list[dict[str, Any]] = []
    degraded: list[dict[str, Any]] = []
    if tier is None or tier == 1:
        under = live.filter(a_switch_id=switch_id, b_adapter__server__isnull=False).values(
            "b_adapter__server_id"
        )
        cables: ServerCables = defaultdict(list)
        for server_id, a_switch, gbps, rail in live.filter(
            b_adapter__server_id__in=under, a_switch__isnull=False
        ).values_list("b_adapter__server_id", "a_switch_id", "gbps", "b_adapter__rail"):
            cables[server_id].append((a_switch, gbps, rail))
        leaf = leaf_loss(cables, switch_id)
        servers = {
            r["id"]: r
            for r in Server.objects.filter(
                Q(pk__in=cables) | Q(physical_host_id__in=leaf.cut)
            ).values(*SERVER_FIELDS)
        }
        rows = [
            r for r in servers.values() if r["id"] in leaf.cut or r["physical_host_id"] in leaf.cut
        ]
        degraded = sorted(
            (
                {
                    "id": sid,
                    "hostname": servers[sid]["hostname"],
                    "other_switches": [],
                    "gbps_lost": lost,
                    "gbps_before": total,
                    "rails_lost": rails,
                }
                for sid, (lost, total, rails) in leaf.degraded.items()
                if sid in servers
            ),
            key=lambda d: d["hostname"],
        )
    else:
        tiers = {
            sid: override or inferred
            for sid, override, inferred in Switch.objects.filter(
                fabric_id=switch.fabric_id, gone_at__isnull=True
            ).values_list("id", "tier_override", "tier_inferred")
        }
        trunks = live.filter(a_switch__isnull=False, b_switch__isnull=False).values_list(
            "a_switch_id", "b_switch_id", "gbps"
        )
        spine = spine_loss(trunks, tiers, switch_id)
    fabric = {
        "fabric": switch.fabric.name,
        "switch": name,
        "switch_id": switch_id,
        "tier": tier,
        "gbps_lost": leaf.gbps_lost if leaf else spine.gbps_lost if spine else 0.0,
        "bisection_share_lost": spine.share if spine else None,
        "servers_degraded": len(degraded),
        "isolated_switches": spine.isolated_switches if spine else [],
        "message": fabric_loss_words(name, tier, leaf, spine),
    }
    return rows, degraded, fabric


def fabric_switch_ranking(limit: int = 50, counts: ServerCounts | None = None) -> dict[str, Any]:
    """`failure_domain_ranking(by="switch")`: discovered fabric switches ranked by what their
    failure takes (six queries, three with `counts` given; the fleet's GPUs are their sum): first
    the GPUs of servers they cut off (every fabric cable on them), then the Gb/s lost. A
    leaf takes rail k of each server under it (`leaf_loss`: bandwidth lost, nodes still up),
    a spine its share of the bisection (`spine_loss`)."""
    from fabric.models import FabricLink, Switch

    switches = list(
        Switch.objects.filter(gone_at__isnull=True).values_list(
            "id", "name", "guid", "fabric_id", "fabric__name", "tier_override", "tier_inferred"
        )
    )
    live = FabricLink.objects.filter(gone_at__isnull=True, state="up", a_switch__isnull=False)
    cables: dict[int, ServerCables] = defaultdict(lambda: defaultdict(list))
    under: dict[int, set[int]] = defaultdict(set)
    for fabric_id, server_id, switch_id, gbps, rail in live.filter(
        b_adapter__server__isnull=False
    ).values_list("fabric_id", "b_adapter__server_id", "a_switch_id", "gbps", "b_adapter__rail"):
        cables[fabric_id][server_id].append((switch_id, gbps, rail))
        under[switch_id].add(server_id)
    trunks: dict[int, list[tuple[int, int, float | None]]] = defaultdict(list)
    for fabric_id, a, b, gbps in live.filter(b_switch__isnull=False).values_list(
        "fabric_id", "a_switch_id", "b_switch_id", "gbps"
    ):
        trunks[fabric_id].append((a, b, gbps))
    tiers: dict[int, dict[int, int | None]] = defaultdict(dict)
    for sid, _name, _guid, fabric_id, _fabric, override, inferred in switches:
        tiers[fabric_id][sid] = override or inferred
    spines: dict[int, SpineLoss] = {}
    for fabric_id, fabric_tiers in tiers.items():
        spines.update(spine_losses(trunks[fabric_id], fabric_tiers))
    gpus, migs, nodes = counts or server_counts()
    items: list[dict[str, Any]] = []
    for sid, name, guid, fabric_id, fabric, override, inferred in switches:
        tier = override or inferred
        label = name or guid
        leaf = spine = None
        cut: set[int] = set()
        degraded: dict[int, tuple[float, float, list[int]]] = {}
        gbps_lost = 0.0
        if sid in spines:
            spine = spines[sid]
            gbps_lost = spine.gbps_lost
        else:
            mine = {s: cables[fabric_id][s] for s in under[sid]}
            leaf = leaf_loss(mine, sid)
            cut, degraded = leaf.cut, leaf.degraded
            gbps_lost = leaf.gbps_lost + sum(g or 0.0 for s in cut for _, g, _ in mine[s])
        items.append(
            {
                "name": f"{fabric}/{label}",
                "id": sid,
                "fabric": fabric,
                "tier": tier,
                "servers": len(cut),
                "nodes": sum(nodes.get(s, 0) for s in cut),
                "gpus": sum(gpus.get(s, 0) for s in cut),
                "mig_devices": sum(migs.get(s, 0) for s in cut),
                "servers_degraded": len(degraded),
                "gpus_degraded": sum(gpus.get(s, 0) for s in degraded),
                "rails_lost": sorted({r for _, _, rails in degraded.values() for r in rails}),
                "gbps_lost": gbps_lost,
                "bisection_share_lost": spine.share if spine else None,
                "isolated_switches": len(spine.isolated_switches) if spine else 0,
                "message": fabric_loss_words(label, tier, leaf, spine),
            }
        )
    items.sort(key=lambda i: (-i["gpus"], -i["gbps_lost"], i["name"]))
    # `count` is every switch ranked, as for racks and servers; `items` the first `limit`
    return ranking_answer("switch", sum(gpus.values()), items[:limit], count=len(items), unracked=0)
