"""What a failure takes, as arithmetic: pure functions over plain rows, no ORM.

A switch cuts off the servers whose every switched NIC hangs off it (`switch_split`); the
capacity lost per cluster and partition and the largest job before and after come from the
fleet as placement reads it (`capacity_after`); racks and servers rank by the GPUs they take
(`rank_domains`); a fabric leaf takes rails, a spine a share of the bisection (`leaf_loss`,
`spine_loss`). `selectors` reads the rows these take, in a fixed number of queries.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from inventory.choices import link_rank
from workloads.describe import workload_label

from ..facts import Fleet
from ..planner import node_free_gpus


class FailureDomainError(ValueError):
    """A failure domain that is not named right; `field` names the parameter at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def switch_split(switches: dict[int, set[str]], switch: str) -> tuple[set[int], set[int]]:
    """Servers (by id, with the switches their NICs hang off) cut off by `switch`, because
    every switched NIC is on it, and those that keep a path through another switch."""
    on_it = {s for s, names in switches.items() if switch in names}
    cut = {s for s in on_it if switches[s] == {switch}}
    return cut, on_it - cut


def capacity_after(fleet: Fleet, lost_node_ids: set[int]) -> dict[str, Any]:
    """Per cluster and partition: GPU capacity lost and its share; the largest job before/after.

    The largest job is the most free GPUs on one node (a Kubernetes pod) and the total free
    (a Slurm job spread over nodes), among ready, schedulable nodes. GPUs needing action
    (`health.selectors`) are lost already: never free, before or after, and counted per cluster.
    """
    free = node_free_gpus(fleet)
    clusters: dict[str, dict[str, Any]] = {}
    partitions: dict[tuple[str, str], dict[str, Any]] = {}
    for node in fleet.nodes:
        # a node stands for its twins (`FleetNode.twins`): alike but for who they are
        weight = node.weight
        lost = (node.id in lost_node_ids) + sum(1 for t in node.twins if t[0] in lost_node_ids)
        kept = weight - lost
        entry = clusters.setdefault(
            node.cluster,
            {
                "cluster": node.cluster,
                "kind": node.kind,
                "gpu_capacity": 0,
                "gpu_capacity_lost": 0,
                "nodes_lost": 0,
                "largest_node_free_before": 0,
                "largest_node_free_after": 0,
                "free_gpus_before": 0,
                "free_gpus_after": 0,
                "gpus_needing_action": 0,
            },
        )
        entry["gpu_capacity"] += node.gpu_capacity * weight
        entry["gpus_needing_action"] += node.gpus_needing_action * weight
        node_free = free.get(node.id, 0)
        entry["free_gpus_before"] += node_free * weight
        entry["largest_node_free_before"] = max(entry["largest_node_free_before"], node_free)
        entry["gpu_capacity_lost"] += node.gpu_capacity * lost
        entry["nodes_lost"] += lost
        entry["free_gpus_after"] += node_free * kept
        if kept:
            entry["largest_node_free_after"] = max(entry["largest_node_free_after"], node_free)
        for partition in node.partitions:
            part = partitions.setdefault(
                (node.cluster, partition),
                {
                    "cluster": node.cluster,
                    "partition": partition,
                    "gpu_capacity": 0,
                    "gpu_capacity_lost": 0,
                },
            )
            part["gpu_capacity"] += node.gpu_capacity * weight
            part["gpu_capacity_lost"] += node.gpu_capacity * lost
    for entry in [*clusters.values(), *partitions.values()]:
        entry["share_lost"] = share_of(entry["gpu_capacity_lost"], entry["gpu_capacity"])
    return {
        "clusters": sorted(clusters.values(), key=lambda c: c["cluster"]),
        "partitions": sorted(partitions.values(), key=lambda p: (p["cluster"], p["partition"])),
    }


def share_of(part: float, whole: float) -> float:
    return round(part / whole, 4) if whole else 0.0


# -- the workloads a failure hits ---------------------------------------------------------


class HeldGpus(NamedTuple):
    """The GPUs a running workload holds on one node, as the failure arithmetic needs them."""

    workload_id: int
    scheduler_id: str
    user: str
    kind: str
    cluster: str
    server_id: int | None
    node: str
    gpus: int = 1


class Holdings:
    """Running workloads' GPUs by server, and the nodes each workload spans: read once (one
    query), then asked about any number of domains."""

    def __init__(self, held: Iterable[HeldGpus] = ()) -> None:
        self.by_server: dict[int, list[HeldGpus]] = defaultdict(list)
        self.nodes: dict[int, set[str]] = defaultdict(set)
        self.servers: dict[int, set[int | None]] = defaultdict(set)
        for gpu in held:
            self.nodes[gpu.workload_id].add(gpu.node)
            self.servers[gpu.workload_id].add(gpu.server_id)
            if gpu.server_id is not None:
                self.by_server[gpu.server_id].append(gpu)


def workloads_hit(
    holdings: Holdings,
    *,
    lost: Iterable[int],
    degraded: Iterable[int] = (),
    local: Mapping[int, Hashable] | None = None,
) -> list[dict[str, Any]]:
    """The workloads a failure hits: every workload with a GPU on a `lost` server stops (a
    job does not survive one of its nodes; a job wholly under a leaf that cuts its servers
    off stops with them); a workload spanning several nodes with a GPU on a `degraded`
    server (a leaf's rail, a spine's share of the way up) loses bandwidth, as it runs at its
    slowest node's pace. A one-node workload on a degraded server keeps its GPUs' links and
    is not listed; so is one whose servers all share one `local` key (a spine: servers
    under the same leaves, whose traffic never climbs to it). `gpus` counts the GPUs it
    holds on the servers named. Those that stop come first, then by GPUs, most first."""

    def stays_local(workload_id: int) -> bool:
        if local is None:
            return False
        keys = {local.get(s) if s is not None else None for s in holdings.servers[workload_id]}
        return len(keys) == 1 and None not in keys

    found: dict[int, dict[str, Any]] = {}
    for which, servers in (("stops", lost), ("loses_bandwidth", degraded)):
        for server_id in set(servers):
            for gpu in holdings.by_server.get(server_id, ()):
                entry = found.get(gpu.workload_id)
                if entry is None:
                    if which == "loses_bandwidth" and (
                        len(holdings.nodes[gpu.workload_id]) < 2 or stays_local(gpu.workload_id)
                    ):
                        continue
                    entry = found[gpu.workload_id] = {
                        "id": gpu.workload_id,
                        "scheduler_id": gpu.scheduler_id,
                        "user": gpu.user,
                        "kind": gpu.kind,
                        "cluster": gpu.cluster,
                        "nodes": len(holdings.nodes[gpu.workload_id]),
                        "gpus": 0,
                        "stops": which == "stops",
                        "loses_bandwidth": which == "loses_bandwidth",
                    }
                if entry["stops"] == (which == "stops"):
                    entry["gpus"] += gpu.gpus
    return sorted(found.values(), key=lambda w: (not w["stops"], -w["gpus"], w["scheduler_id"]))


RANKS = ("gpus", "workloads", "users")
"""What a ranking orders by: GPUs taken down (the default), workloads hit, users hit."""


def hit_counts(hit: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The ranking's counts of `workloads_hit`: workloads and distinct users hit."""
    return {"workloads": len(hit), "users": len({w["user"] for w in hit if w["user"]})}


def rank_key(rank: str) -> Any:
    """The sort key of ranked items for `rank` (one of `RANKS`), ties by GPUs then name."""
    if rank == "gpus":
        return lambda i: (-i["gpus"], -i.get("nodes", 0), str(i["name"]))
    return lambda i: (-i[rank], -i["gpus"], str(i["name"]))


def workload_words(workload: Mapping[str, Any]) -> str:
    """ "job 5679 of alice, 16 GPUs": how the page names one (`workload_label`)."""
    return workload_label(
        str(workload.get("kind") or ""),
        str(workload["scheduler_id"]),
        str(workload.get("user") or ""),
        int(workload["gpus"]),
    )


class ServerCounts(NamedTuple):
    """GPUs (not lost), their MIG devices and live nodes, per server id; the running
    workloads' GPUs."""

    gpus: dict[int, int]
    migs: dict[int, int]
    nodes: dict[int, int]
    held: Holdings


def rank_domains(
    servers: Sequence[Mapping[str, Any]],
    *,
    gpus: dict[int, int],
    migs: dict[int, int],
    nodes: dict[int, int],
    held: Holdings | None = None,
    by: str,
    limit: int,
    rank: str = "gpus",
) -> dict[str, Any]:
    """The ranking of `failure_domain_ranking` from server rows (`id`, `hostname`, `rack`,
    `physical_host_id`), GPU, MIG device and node counts per server id and the running
    workloads' GPUs (`held`): each item with the workloads and users it stops, ordered by
    `rank` (`RANKS`)."""
    hosts = {s["id"]: s for s in servers}
    fleet_gpus = sum(gpus.values())
    items: dict[Any, dict[str, Any]] = {}
    members: dict[Any, list[int]] = defaultdict(list)
    unracked = 0
    for s in servers:
        host = hosts.get(s["physical_host_id"] or s["id"], s)
        if by == "rack":
            if not host["rack"]:
                unracked += 1
                continue
            key, label = host["rack"], host["rack"]
        else:
            key, label = host["id"], host["hostname"]
        item = items.setdefault(
            key,
            {
                "name": label,
                "id": host["id"] if by == "server" else None,
                "servers": 0,
                "nodes": 0,
                "gpus": 0,
                "mig_devices": 0,
            },
        )
        members[key].append(s["id"])
        item["servers"] += 1
        item["nodes"] += nodes.get(s["id"], 0)
        item["gpus"] += gpus.get(s["id"], 0)
        item["mig_devices"] += migs.get(s["id"], 0)
    for key, item in items.items():
        item.update(hit_counts(workloads_hit(held or Holdings(), lost=members[key])))
    ranked = sorted(items.values(), key=rank_key(rank))
    return ranking_answer(
        by, fleet_gpus, ranked[:limit], count=len(ranked), unracked=unracked, rank=rank
    )


def ranking_answer(
    by: str,
    fleet_gpus: int,
    items: list[dict[str, Any]],
    *,
    count: int,
    unracked: int,
    rank: str = "gpus",
) -> dict[str, Any]:
    """The ranking's answer, each item with its share of the fleet's GPUs."""
    for item in items:
        item["share_of_fleet_gpus"] = share_of(item["gpus"], fleet_gpus)
    return {
        "by": by,
        "rank": rank,
        "fleet_gpus": fleet_gpus,
        "count": count,
        "unracked_servers": unracked,
        "items": items,
    }


# -- the discovered fabric ----------------------------------------------------------------
# A fabric switch (`?switch=<id>`) takes bandwidth before it takes servers: a leaf takes
# rail k of each server under it (the NIC on it), and the servers stay up on their other
# rails; a spine takes its share of the bandwidth between the leaves.

ServerCables = dict[int, list[tuple[int, float | None, int | None]]]
"""server id -> its live fabric cables: (switch id, Gb/s, rail of the NIC)."""


@dataclass(frozen=True)
class LeafLoss:
    cut: set[int]
    """servers whose every fabric cable is on the switch: off the fabric."""
    degraded: dict[int, tuple[float, float, list[int]]]
    """server id -> (Gb/s lost, Gb/s it had, rails lost), for servers that keep a path."""

    @property
    def gbps_lost(self) -> float:
        return sum(lost for lost, _total, _rails in self.degraded.values())


def leaf_loss(cables: ServerCables, switch_id: int) -> LeafLoss:
    """What a switch with servers under it takes: their NICs on it, and with them the rails."""
    cut: set[int] = set()
    degraded: dict[int, tuple[float, float, list[int]]] = {}
    for server_id, ends in cables.items():
        mine = [(gbps or 0.0, rail) for switch, gbps, rail in ends if switch == switch_id]
        if not mine:
            continue
        if len(mine) == len(ends):
            cut.add(server_id)
            continue
        lost = sum(g for g, _ in mine)
        total = sum(gbps or 0.0 for _, gbps, _ in ends)
        degraded[server_id] = (lost, total, sorted({r for _, r in mine if r is not None}))
    return LeafLoss(cut, degraded)


@dataclass(frozen=True)
class SpineLoss:
    gbps_lost: float
    """Gb/s of the switch's cables to the tier below."""
    tier_gbps: float
    """Gb/s of every switch of its tier to the tier below: the bisection it shares."""
    isolated_switches: list[int]
    """Lower switches whose every uplink is on it: cut off from the rest of the fabric."""

    @property
    def share(self) -> float:
        return round(self.gbps_lost / self.tier_gbps, 4) if self.tier_gbps else 0.0


def spine_loss(
    trunks: Iterable[tuple[int, int, float | None]], tiers: Mapping[int, int | None], switch_id: int
) -> SpineLoss:
    """A switch above the leaves: its share of the bandwidth its tier carries downwards."""
    tiers = {**tiers, switch_id: tiers.get(switch_id) or 2}
    return spine_losses(trunks, tiers)[switch_id]


def spine_losses(
    trunks: Iterable[tuple[int, int, float | None]], tiers: Mapping[int, int | None]
) -> dict[int, SpineLoss]:
    """`spine_loss` of every switch of tier 2 and above at once, in one pass over the
    cables (the ranking judges every switch of a fabric)."""
    down: dict[int, float] = defaultdict(float)
    uplinks: dict[int, set[int]] = defaultdict(set)
    for a, b, gbps in trunks:
        ta, tb = tiers.get(a) or 0, tiers.get(b) or 0
        if ta == tb:
            continue
        upper, lower = (a, b) if ta > tb else (b, a)
        down[upper] += gbps or 0.0
        uplinks[lower].add(upper)
    tier_total: dict[int, float] = defaultdict(float)
    for switch, gbps in down.items():
        tier_total[tiers.get(switch) or 0] += gbps
    isolated: dict[int, list[int]] = defaultdict(list)
    for lower, ups in sorted(uplinks.items()):
        upper = next(iter(ups))
        if len(ups) == 1 and (tiers.get(lower) or 0) == (tiers.get(upper) or 0) - 1:
            isolated[upper].append(lower)
    return {
        switch: SpineLoss(down.get(switch, 0.0), tier_total[tier], isolated.get(switch, []))
        for switch, tier in tiers.items()
        if tier is not None and tier >= 2
    }


def uplink_shares(
    trunks: Iterable[tuple[int, int, float | None]], tiers: Mapping[int, int | None], switch_id: int
) -> dict[int, float]:
    """Lower switch id -> the share of its bandwidth towards the top of the fabric that
    `switch_id` takes, for every switch below it that loses some.

    The switch itself loses all; a switch below loses the Gb/s-weighted mean of what its
    uplinks' far ends lose (a leaf with 8 equal uplinks, one to the failed spine: 1/8). A
    core's share reaches the leaves through the spines the same way.
    """
    tiers = {**tiers, switch_id: tiers.get(switch_id) or 2}
    top = tiers[switch_id] or 2
    ups: dict[int, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for a, b, gbps in trunks:
        ta, tb = tiers.get(a) or 0, tiers.get(b) or 0
        if ta == tb:
            continue
        upper, lower = (a, b) if ta > tb else (b, a)
        ups[lower][upper] += gbps or 0.0
    lost: dict[int, float] = {switch_id: 1.0}
    for tier in range(top - 1, 0, -1):
        for lower, uplinks in ups.items():
            if (tiers.get(lower) or 0) != tier:
                continue
            total = sum(uplinks.values())
            share = sum(g * lost.get(u, 0.0) for u, g in uplinks.items())
            if total and share:
                lost[lower] = round(share / total, 4)
    del lost[switch_id]
    return lost


def server_shares(
    cables: ServerCables, shares: Mapping[int, float]
) -> dict[int, tuple[float, float]]:
    """Server id -> (Gb/s lost beyond its leaves, Gb/s it had) when each leaf loses `shares`
    of its uplinks (`uplink_shares`): each NIC keeps the rest of its leaf's way up."""
    found: dict[int, tuple[float, float]] = {}
    for server_id, ends in cables.items():
        lost = sum((gbps or 0.0) * shares.get(switch, 0.0) for switch, gbps, _rail in ends)
        if lost:
            found[server_id] = (round(lost, 3), sum(gbps or 0.0 for _, gbps, _ in ends))
    return found


def behind_shares(losses: Iterable[tuple[float, float]]) -> dict[float, int]:
    """Each share lost (0..1) of (Gb/s lost, Gb/s before) pairs, and how many servers lose it."""
    found: dict[float, int] = defaultdict(int)
    for lost, total in losses:
        found[share_of(lost, total)] += 1
    return dict(found)


def cabled_alike(cables: ServerCables) -> dict[tuple[tuple[int, float], ...], list[int]]:
    """Servers by their cables (the switches and Gb/s, rails aside): what a switch above the
    leaves takes is the same for every server of a group, so a fabric's spines are judged
    per group (a leaf group's servers are one), not per server."""
    groups: dict[tuple[tuple[int, float], ...], list[int]] = defaultdict(list)
    for server_id, ends in cables.items():
        groups[tuple(sorted((switch, gbps or 0.0) for switch, gbps, _ in ends))].append(server_id)
    return dict(groups)


GpuNicLinks = dict[int, list[tuple[str, str]]]
"""GPU id -> its links to the server's NICs: (NIC name, link class as `nvidia-smi topo -m`)."""


def gpus_losing_nic(
    links: GpuNicLinks, fabric_nics: set[str], lost: set[str]
) -> dict[int, list[str]]:
    """GPU id -> the NICs nearest it that fail, for the GPUs of one server whose every
    nearest fabric NIC (the best link class among the NICs cabled on the fabric: PIX on a
    rail-optimised server) is among `lost`. A GPU with an equally near NIC left keeps it."""
    found: dict[int, list[str]] = {}
    for gpu, ends in links.items():
        mine = [(link_rank(cls), nic) for nic, cls in ends if nic in fabric_nics]
        if not mine:
            continue
        best = min(rank for rank, _ in mine)
        nearest = sorted({nic for rank, nic in mine if rank == best})
        if all(nic in lost for nic in nearest):
            found[gpu] = nearest
    return found


JOB_GPUS_PER_NODE = 8
"""The multi-node job a switch failure is judged for: 8 GPUs on each node it spans."""


def job_slots(gpus: Mapping[int, int], servers: Iterable[int]) -> int:
    """Slots of a multi-node job with `JOB_GPUS_PER_NODE` GPUs a node on these servers."""
    return sum(gpus.get(s, 0) // JOB_GPUS_PER_NODE for s in set(servers))


def percent(share: float) -> str:
    """0.125 -> "12.5%", 0.5 -> "50%"."""
    return f"{share * 100:.1f}".removesuffix(".0") + "%"


def share_range(shares: Iterable[float]) -> str:
    """ "12.5%" when every share is the same, else "12.5% to 25%"."""
    found = sorted({round(s, 4) for s in shares})
    if not found:
        return "0%"
    if len(found) == 1:
        return percent(found[0])
    return f"{percent(found[0])} to {percent(found[-1])}"


def tier_role(tier: int | None) -> str:
    """A switch's place in the tree, in a word."""
    return {None: "switch", 1: "leaf", 2: "spine", 3: "core"}.get(tier, f"tier {tier}")


def per_job_words(slots: int, shares: Sequence[float]) -> str:
    """What a multi-node job placed on the degraded servers loses, per node."""
    if not slots:
        return f"No slot of a {JOB_GPUS_PER_NODE}-GPU-a-node job loses bandwidth."
    return (
        f"{slots:,} slot(s) of a multi-node job with {JOB_GPUS_PER_NODE} GPUs a node lose "
        f"{share_range(shares)} of their network per node: a job on any of them runs at its "
        f"slowest node's pace."
    )


def tier_span(tier: int | None) -> str:
    """The bandwidth a switch of `tier` carries downwards, in words."""
    return {2: "leaf-to-spine", 3: "spine-to-core"}.get(
        tier or 2, f"tier {(tier or 2) - 1}-to-{tier}"
    )


def fabric_loss_words(
    name: str,
    tier: int | None,
    leaf: LeafLoss | None,
    spine: SpineLoss | None,
    *,
    behind: Mapping[float, int] | None = None,
) -> str:
    """The answer in a sentence or two, the same in the ranking and in the failure domain: a
    leaf's rails, a spine's share of the bandwidth below it and what the servers `behind` it
    lose (`behind_shares`: each share lost, 0..1, and how many servers lose it)."""
    if leaf is not None:
        if not leaf.degraded and leaf.cut:
            return (
                f"{name} holds the only fabric cables of {len(leaf.cut):,} server(s): they are "
                f"cut off, their nodes and GPUs with them."
            )
        rails = sorted({r for _, _, rs in leaf.degraded.values() for r in rs})
        rail_words = f"rail {', '.join(map(str, rails))}" if rails else "one NIC"
        before = sum(total for _lost, total, _rails in leaf.degraded.values())
        share = f" ({percent(leaf.gbps_lost / before)} of theirs)" if before else ""
        words = (
            f"{name} takes {rail_words} of {len(leaf.degraded):,} server(s) under it: "
            f"{leaf.gbps_lost:,.0f} Gb/s of network lost{share}"
        )
        words += "; those servers and their nodes stay up on their other NICs."
        if leaf.cut:
            words += f" {len(leaf.cut):,} server(s) have no other fabric cable and are cut off."
        return words
    if spine is not None:
        words = (
            f"{name} carries {percent(spine.share)} of the {tier_span(tier)} (bisection) "
            f"bandwidth: {spine.gbps_lost:,.0f} of {spine.tier_gbps:,.0f} Gb/s"
        )
        if behind:
            words += (
                f"; {sum(behind.values()):,} server(s) lose {share_range(behind)} of theirs "
                f"beyond their leaf"
            )
        words += "; no server goes down."
        if spine.isolated_switches:
            words += (
                f" {len(spine.isolated_switches):,} switch(es) below have no other uplink and "
                f"are cut off from the rest of the fabric."
            )
        return words
    return f"{name} carries no cable: nothing is lost."
