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
from inventory.models import Gpu, Link, MigDevice, Nic, Server
from workloads.models import Allocation

from ..facts import Fleet
from ..selectors import fleet_counts
from ..service import gc_paused
from .arithmetic import (
    JOB_GPUS_PER_NODE,
    RANKS,
    FailureDomainError,
    GpuNicLinks,
    HeldGpus,
    Holdings,
    ServerCables,
    ServerCounts,
    SpineLoss,
    behind_shares,
    cabled_alike,
    capacity_after,
    fabric_loss_words,
    gpus_losing_nic,
    hit_counts,
    job_slots,
    leaf_loss,
    per_job_words,
    rank_domains,
    rank_key,
    ranking_answer,
    server_shares,
    share_of,
    spine_loss,
    spine_losses,
    switch_split,
    tier_role,
    tier_span,
    uplink_shares,
    workloads_hit,
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
    degraded_gpus: list[dict[str, Any]] = []
    fabric: dict[str, Any] | None = None
    local: dict[int, frozenset[int]] | None = None
    if kind == "server":
        rows = list(
            Server.objects.filter(Q(pk=server) | Q(physical_host_id=server)).values(*SERVER_FIELDS)
        )
    elif kind == "rack":
        rows = list(
            Server.objects.filter(Q(rack=rack) | Q(physical_host__rack=rack)).values(*SERVER_FIELDS)
        )
    elif str(switch).strip().isdigit():  # a discovered fabric switch, by id
        rows, degraded, degraded_gpus, fabric, local = _fabric_switch_servers(
            int(str(switch).strip())
        )
    else:  # a switch by the name agents' LLDP and people's locations give
        rows, degraded, degraded_gpus = _switch_servers(str(switch))
    lost_ids = {r["id"] for r in rows}
    degraded_ids = {d["id"] for d in degraded}
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
    degraded_nodes = _degraded_nodes(fleet, degraded)
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
        "degraded_nodes": degraded_nodes,
        "degraded_gpus": degraded_gpus,
        "fabric": fabric,
        "workloads": workloads_hit(
            held_gpus(lost_ids | degraded_ids), lost=lost_ids, degraded=degraded_ids, local=local
        ),
        **capacity_after(fleet, {twin[0] for _, twin in lost_nodes}),
    }


def _degraded_nodes(fleet: Fleet, degraded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The scheduler nodes of the degraded servers, each with its server's loss; fills each
    degraded server's `nodes` (names) on the way. No query: the fleet is read already."""
    by_server = {d["id"]: d for d in degraded}
    found = []
    for node in fleet.nodes:
        for node_id, node_name, server_id, _hostname in node.identities:
            server = by_server.get(server_id or 0)
            if server is None:
                continue
            server["nodes"].append(node_name)
            found.append(
                {
                    "id": node_id,
                    "name": node_name,
                    "cluster": node.cluster,
                    "kind": node.kind,
                    "server": server_id,
                    "server_hostname": server["hostname"],
                    "gpu_capacity": node.gpu_capacity,
                    "gbps_lost": server.get("gbps_lost"),
                    "share_lost": server.get("share_lost"),
                    "rails_lost": server.get("rails_lost", []),
                }
            )
    for server in degraded:
        server["nodes"].sort()
    return sorted(found, key=lambda n: (n["cluster"], n["name"]))


def _switch_servers(
    switch: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Servers cut off by the switch (all switched NICs on it) and VMs on them; the degraded,
    with the NICs (their speed) they lose on it; the GPUs whose nearest NIC that is. Five
    queries: the NICs, the servers, and `_degraded`'s."""
    on_switch = Nic.objects.filter(switch=switch).values("server_id")
    switches: dict[int, set[str]] = defaultdict(set)
    speeds: dict[int, list[tuple[str, float, bool]]] = defaultdict(list)
    for server_id, name, nic, mbps in (
        Nic.objects.filter(server_id__in=on_switch)
        .exclude(switch="")
        .values_list("server_id", "switch", "name", "speed_mbps")
    ):
        switches[server_id].add(name)
        speeds[server_id].append((nic, (mbps or 0) / 1000, name == switch))
    cut, partial = switch_split(switches, switch)
    rows = list(
        Server.objects.filter(Q(pk__in=switches) | Q(physical_host_id__in=cut)).values(
            *SERVER_FIELDS
        )
    )
    lost = [r for r in rows if r["id"] in cut or r["physical_host_id"] in cut]
    servers = {r["id"]: r for r in rows if r["id"] in partial and r["physical_host_id"] not in cut}
    losses = {
        sid: (
            sum(g for _n, g, on in speeds[sid] if on),
            sum(g for _n, g, _on in speeds[sid]),
        )
        for sid in servers
    }
    lost_nics = {sid: {n for n, _g, on in speeds[sid] if on} for sid in servers}
    names = {sid: {n: n for n, _g, _on in speeds[sid]} for sid in servers}
    other = {sid: sorted(switches[sid] - {switch}) for sid in servers}
    degraded, gpu_list, _counts = _degraded(
        servers, losses, {}, lost_nics, names, loss="nic", other_switches=other
    )
    return lost, degraded, gpu_list


def failure_domain_ranking(
    *, by: str = "rack", limit: int = 50, rank: str = "gpus"
) -> dict[str, Any]:
    """Racks, physical servers or fabric switches ranked by the GPUs they take down (VMs
    count with their host; a switch, see `fabric_switch_ranking`), or by the running
    workloads or users they hit (`rank`).

    Racks and servers: five queries (servers, GPU, MIG and node counts per server, the
    running workloads' GPUs); switches: seven. Servers without a rack are counted in
    `unracked_servers`, not ranked as a rack.
    """
    if by not in ("rack", "server", "switch"):
        raise FailureDomainError("by", "rack, server or switch")
    if rank not in RANKS:
        raise FailureDomainError("rank", ", ".join(RANKS))
    if by == "switch":
        return fabric_switch_ranking(limit, rank=rank)
    servers = list(Server.objects.values("id", "hostname", "rack", "physical_host_id"))
    return rank_domains(servers, **server_counts()._asdict(), by=by, limit=limit, rank=rank)


def failure_domain_rankings(limit: int = 50, rank: str = "gpus") -> dict[str, dict[str, Any]]:
    """The rankings by rack, by server and by switch (the failure tab shows all three), the
    per-server counts read once for the three: eight queries."""
    counts = server_counts()
    servers = list(Server.objects.values("id", "hostname", "rack", "physical_host_id"))
    found = {
        by: rank_domains(servers, **counts._asdict(), by=by, limit=limit, rank=rank)
        for by in ("rack", "server")
    }
    found["switch"] = fabric_switch_ranking(limit, counts, rank=rank)
    return found


def server_counts() -> ServerCounts:
    """Four queries, each one read over the fleet: three counts, the running GPUs."""
    return ServerCounts(
        gpus=_count_by_server(Gpu.objects.exclude(status=GpuStatus.LOST), "server_id"),
        migs=_count_by_server(
            MigDevice.objects.exclude(gpu__status=GpuStatus.LOST), "gpu__server_id"
        ),
        nodes=_count_by_server(Node.objects.filter(gone_at__isnull=True), "server_id"),
        held=held_gpus(),
    )


def held_gpus(server_ids: set[int] | None = None) -> Holdings:
    """The GPUs running workloads hold (allocations not ended), per workload and node, in
    one query: every one, or those of the workloads with a GPU on `server_ids` (all their
    nodes, so a failure can tell a one-node job from a spread one)."""
    held = Allocation.objects.filter(until__isnull=True)
    if server_ids is not None:
        if not server_ids:
            return Holdings()
        held = held.filter(
            workload_id__in=Allocation.objects.filter(
                until__isnull=True, server_id__in=server_ids
            ).values("workload_id")
        )
    rows = (
        held.order_by()
        .values_list(
            "workload_id",
            "workload__scheduler_id",
            "workload__user",
            "workload__kind",
            "workload__cluster__name",
            "server_id",
            "node_name",
        )
        .annotate(n=Count("id"))
    )
    return Holdings(HeldGpus(*row) for row in rows)


def failure_domain_choices() -> dict[str, list[str]]:
    """Racks and switches that people have entered, for the failure-domain form (2 queries)."""
    racks = Server.objects.exclude(rack="").order_by("rack").values_list("rack", flat=True)
    switches = Nic.objects.exclude(switch="").order_by("switch").values_list("switch", flat=True)
    return {"racks": list(racks.distinct()), "switches": list(switches.distinct())}


TIER_GROUPS = {1: "leaves", 2: "spines", 3: "cores"}


def fabric_switch_choices() -> list[dict[str, Any]]:
    """The discovered fabrics' switches for the failure-domain picker, grouped by fabric and
    tier (leaves, spines, cores; a switch of no known tier last), by name: one query."""
    from fabric.models import Switch

    groups: dict[tuple[str, int | None], list[dict[str, Any]]] = defaultdict(list)
    for sid, name, guid, rail, override, inferred, fabric in Switch.objects.filter(
        gone_at__isnull=True
    ).values_list("id", "name", "guid", "rail", "tier_override", "tier_inferred", "fabric__name"):
        groups[(fabric, override or inferred)].append(
            {"id": sid, "name": name or guid, "rail": rail}
        )
    return [
        {
            "fabric": fabric,
            "tier": tier,
            "label": f"{fabric}: {TIER_GROUPS.get(tier or 0) or _tier_words(tier)}",
            "switches": sorted(found, key=lambda s: (s["rail"] is None, s["name"])),
        }
        for (fabric, tier), found in sorted(
            groups.items(), key=lambda g: (g[0][0], g[0][1] is None, g[0][1] or 0)
        )
    ]


def _tier_words(tier: int | None) -> str:
    return f"tier {tier}" if tier else "tier unknown"


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
) -> tuple[
    list[dict[str, Any]],
    list[dict[str, Any]],
    list[dict[str, Any]],
    dict[str, Any],
    dict[int, frozenset[int]] | None,
]:
    """The servers a discovered fabric switch cuts off and degrades, what it takes, in
    words and numbers, and above the leaves each degraded server's leaves (a workload under
    one set of leaves never reaches the switch: `workloads_hit`'s `local`). Five queries
    for a leaf (the switch, the cables of the servers under it, their servers, their GPUs,
    their GPU-NIC links), six above the leaves (the switch, the tiers, the trunks, the
    cables of the servers below, their servers, their GPUs).

    A leaf degrades the servers it takes a NIC of (`rails_lost`, `nics_lost`, the GPUs whose
    nearest NIC that is); a spine the servers under the leaves it serves, by the share of
    their way up it carries (`uplink_shares`).
    """
    from fabric.models import FabricLink, Switch

    switch = (
        Switch.objects.filter(pk=switch_id, gone_at__isnull=True)
        .select_related("fabric")
        .only("id", "name", "guid", "rail", "tier_override", "tier_inferred", "fabric__name")
        .first()
    )
    if switch is None:
        raise FailureDomainError("switch", f"no fabric switch {switch_id}")
    live = FabricLink.objects.filter(fabric_id=switch.fabric_id, gone_at__isnull=True, state="up")
    name = str(switch)
    tier = switch.tier
    leaf = spine = None
    rows: list[dict[str, Any]] = []
    cables: ServerCables = defaultdict(list)
    nic_names: dict[int, dict[str, str]] = defaultdict(dict)  # server -> NIC name/GUID -> key
    lost_nics: dict[int, set[str]] = defaultdict(set)
    if tier is None or tier == 1:
        under = live.filter(a_switch_id=switch_id, b_adapter__server__isnull=False).values(
            "b_adapter__server_id"
        )
        for server_id, a_switch, gbps, rail, nic, guid in live.filter(
            b_adapter__server_id__in=under, a_switch__isnull=False
        ).values_list(
            "b_adapter__server_id",
            "a_switch_id",
            "gbps",
            "b_adapter__rail",
            "b_adapter__nic",
            "b_adapter__guid",
        ):
            cables[server_id].append((a_switch, gbps, rail))
            key = nic or guid
            nic_names[server_id].update({key: key, guid: key})
            if a_switch == switch_id:
                lost_nics[server_id].add(key)
        leaf = leaf_loss(cables, switch_id)
        losses = {sid: (lost, total) for sid, (lost, total, _r) in leaf.degraded.items()}
        rails = {sid: r for sid, (_l, _t, r) in leaf.degraded.items()}
        servers = {
            r["id"]: r
            for r in Server.objects.filter(
                Q(pk__in=cables) | Q(physical_host_id__in=leaf.cut)
            ).values(*SERVER_FIELDS)
        }
        rows = [
            r for r in servers.values() if r["id"] in leaf.cut or r["physical_host_id"] in leaf.cut
        ]
        gbps_lost = leaf.gbps_lost + sum(g or 0.0 for s in leaf.cut for _, g, _ in cables[s])
    else:
        tiers = {
            sid: override or inferred
            for sid, override, inferred in Switch.objects.filter(
                fabric_id=switch.fabric_id, gone_at__isnull=True
            ).values_list("id", "tier_override", "tier_inferred")
        }
        trunks = list(
            live.filter(a_switch__isnull=False, b_switch__isnull=False).values_list(
                "a_switch_id", "b_switch_id", "gbps"
            )
        )
        spine = spine_loss(trunks, tiers, switch_id)
        shares = uplink_shares(trunks, tiers, switch_id)
        below = live.filter(a_switch_id__in=list(shares), b_adapter__server__isnull=False).values(
            "b_adapter__server_id"
        )
        for server_id, a_switch, gbps, rail in live.filter(
            b_adapter__server_id__in=below, a_switch__isnull=False
        ).values_list("b_adapter__server_id", "a_switch_id", "gbps", "b_adapter__rail"):
            cables[server_id].append((a_switch, gbps, rail))
        losses = server_shares(cables, shares)
        rails = {}
        servers = {r["id"]: r for r in Server.objects.filter(pk__in=losses).values(*SERVER_FIELDS)}
        gbps_lost = spine.gbps_lost
    losses = {sid: loss for sid, loss in losses.items() if sid in servers}
    degraded, gpu_list, gpu_counts = _degraded(
        servers, losses, rails, lost_nics, nic_names, loss="rail" if leaf else "uplink"
    )
    server_share = [d["share_lost"] for d in degraded]
    fabric = {
        "fabric": switch.fabric.name,
        "switch": name,
        "switch_id": switch_id,
        "tier": tier,
        "role": tier_role(tier),
        "rail": switch.rail,
        "gbps_lost": gbps_lost,
        "bisection_share_lost": spine.share if spine else None,
        "bandwidth_between": tier_span(tier) if spine else None,
        "servers_cut": len(leaf.cut) if leaf else 0,
        "servers_degraded": len(degraded),
        "gpus_degraded": sum(d["gpus"] for d in degraded),
        "gpus_nic_lost": len(gpu_list),
        "server_share_lost_min": min(server_share, default=None),
        "server_share_lost_max": max(server_share, default=None),
        "job_gpus_per_node": JOB_GPUS_PER_NODE,
        "job_slots_degraded": job_slots(gpu_counts, losses),
        "isolated_switches": spine.isolated_switches if spine else [],
        "message": fabric_loss_words(
            name, tier, leaf, spine, behind=behind_shares(losses.values()) if spine else None
        ),
        "per_job": per_job_words(job_slots(gpu_counts, losses), server_share),
    }
    local = {sid: frozenset(sw for sw, _g, _r in ends) for sid, ends in cables.items()}
    return rows, degraded, gpu_list, fabric, (None if leaf else local)


def _degraded(
    servers: dict[int, dict[str, Any]],
    losses: dict[int, tuple[float, float]],
    rails: dict[int, list[int]],
    lost_nics: dict[int, set[str]],
    nic_names: dict[int, dict[str, str]],
    *,
    loss: str,
    other_switches: dict[int, list[str]] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[int, int]]:
    """The degraded servers' rows, the GPUs whose nearest NIC is lost, and GPU counts per
    server: two queries (their GPUs; their GPU-NIC links, when a NIC is lost)."""
    gpus: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    for gpu_id, server_id, index, uuid in (
        Gpu.objects.filter(server_id__in=losses)
        .exclude(status=GpuStatus.LOST)
        .order_by("server_id", "index")
        .values_list("id", "server_id", "index", "uuid")
    ):
        gpus[server_id].append((gpu_id, index, uuid))
    wanted = [sid for sid in losses if lost_nics.get(sid)]
    nearest = _gpus_losing_nic(wanted, nic_names, lost_nics) if wanted else {}
    degraded: list[dict[str, Any]] = []
    gpu_list: list[dict[str, Any]] = []
    for sid, (lost, total) in sorted(losses.items(), key=lambda x: servers[x[0]]["hostname"]):
        hostname = servers[sid]["hostname"]
        losing = nearest.get(sid, {})
        degraded.append(
            {
                "id": sid,
                "hostname": hostname,
                "other_switches": (other_switches or {}).get(sid, []),
                "loss": loss,
                "gbps_lost": lost,
                "gbps_before": total,
                "share_lost": share_of(lost, total),
                "rails_lost": rails.get(sid, []),
                "nics_lost": sorted(lost_nics.get(sid, ())),
                "gpus": len(gpus[sid]),
                "gpus_nic_lost": sorted(index for g, index, _ in gpus[sid] if g in losing),
                "nodes": [],
            }
        )
        gpu_list += [
            {
                "id": g,
                "uuid": uuid,
                "index": index,
                "server": sid,
                "server_hostname": hostname,
                "nics": losing[g],
            }
            for g, index, uuid in gpus[sid]
            if g in losing
        ]
    return degraded, gpu_list, {sid: len(found) for sid, found in gpus.items()}


def _gpus_losing_nic(
    server_ids: list[int], nic_names: dict[int, dict[str, str]], lost: dict[int, set[str]]
) -> dict[int, dict[int, list[str]]]:
    """Server id -> GPU id -> the lost NICs nearest it (`gpus_losing_nic`), from the GPU-NIC
    links the agents report (one query). A link's NIC is the fabric's adapter by its GUID,
    else by its name."""
    links: dict[int, GpuNicLinks] = defaultdict(lambda: defaultdict(list))
    for server_id, gpu_id, nic, guid, link_class in Link.objects.filter(
        server_id__in=server_ids, gpu_a__isnull=False, nic__isnull=False
    ).values_list("server_id", "gpu_a_id", "nic__name", "nic__node_guid", "link_class"):
        names = nic_names[server_id]
        key = names.get(guid) if guid else None
        links[server_id][gpu_id].append((key or names.get(nic) or f"~{nic}", link_class))
    return {
        sid: gpus_losing_nic(links[sid], set(nic_names[sid].values()), lost[sid])
        for sid in server_ids
    }


def fabric_switch_ranking(
    limit: int = 50, counts: ServerCounts | None = None, *, rank: str = "gpus"
) -> dict[str, Any]:
    """`failure_domain_ranking(by="switch")`: discovered fabric switches ranked by what their
    failure takes (eight queries, four with `counts` given; the fleet's GPUs are their sum),
    or by the workloads and users they hit (`rank`; `workloads_hit`): first
    the GPUs of servers they cut off (every fabric cable on them), then the Gb/s lost. A
    leaf takes rail k of each server under it (`leaf_loss`: bandwidth lost, nodes still up),
    a spine its share of the bisection (`spine_loss`) and of each server's way up
    (`uplink_shares`), judged once per group of servers cabled alike (`cabled_alike`)."""
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
    gpus, migs, nodes, held = counts or server_counts()
    # a spine is judged per group of servers cabled alike, each group by its first server
    groups: dict[int, dict[int, list[int]]] = {}
    group_gpus: dict[int, dict[int, int]] = {}
    for fabric_id, fabric_cables in cables.items():
        alike = {found[0]: found for found in cabled_alike(fabric_cables).values()}
        groups[fabric_id] = alike
        group_gpus[fabric_id] = {k: sum(gpus.get(s, 0) for s in v) for k, v in alike.items()}
    items: list[dict[str, Any]] = []
    for sid, name, guid, fabric_id, fabric, override, inferred in switches:
        tier = override or inferred
        label = name or guid
        leaf = spine = None
        cut: set[int] = set()
        degraded: dict[int, tuple[float, float, list[int]]] = {}
        behind: dict[float, int] | None = None
        gbps_lost = 0.0
        servers_degraded = gpus_degraded = 0
        degraded_ids: set[int] = set()
        local: dict[int, int] | None = None
        if sid in spines:
            local = {}
            spine = spines[sid]
            gbps_lost = spine.gbps_lost
            shares = uplink_shares(trunks[fabric_id], tiers[fabric_id], sid)
            alike = groups[fabric_id]
            lost = server_shares({first: cables[fabric_id][first] for first in alike}, shares)
            behind = defaultdict(int)
            for key, (gbps, total) in lost.items():
                behind[share_of(gbps, total)] += len(alike[key])
                degraded_ids.update(alike[key])
                local.update(dict.fromkeys(alike[key], key))
                servers_degraded += len(alike[key])
                gpus_degraded += group_gpus[fabric_id][key]
        else:
            mine = {s: cables[fabric_id][s] for s in under[sid]}
            leaf = leaf_loss(mine, sid)
            cut, degraded = leaf.cut, leaf.degraded
            degraded_ids = set(degraded)
            gbps_lost = leaf.gbps_lost + sum(g or 0.0 for s in cut for _, g, _ in mine[s])
            servers_degraded = len(degraded)
            gpus_degraded = sum(gpus.get(s, 0) for s in degraded)
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
                "servers_degraded": servers_degraded,
                "gpus_degraded": gpus_degraded,
                "rails_lost": sorted({r for _, _, rails in degraded.values() for r in rails}),
                "gbps_lost": gbps_lost,
                "bisection_share_lost": spine.share if spine else None,
                "isolated_switches": len(spine.isolated_switches) if spine else 0,
                "message": fabric_loss_words(label, tier, leaf, spine, behind=behind),
                **hit_counts(workloads_hit(held, lost=cut, degraded=degraded_ids, local=local)),
            }
        )
    if rank == "gpus":
        items.sort(key=lambda i: (-i["gpus"], -i["gbps_lost"], i["name"]))
    else:
        items.sort(key=rank_key(rank))
    # `count` is every switch ranked, as for racks and servers; `items` the first `limit`
    return ranking_answer(
        "switch", sum(gpus.values()), items[:limit], count=len(items), unracked=0, rank=rank
    )
