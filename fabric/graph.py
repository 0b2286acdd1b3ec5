"""What follows from a fabric's cabling: tiers, rails, leaf groups, bandwidth. Pure functions
over plain facts (no Django), so each is tested without a database and runs the same on a
snapshot being applied and on stored rows.

Vocabulary: a *leaf* (tier 1) is a switch that servers are cabled to; tiers count up from
there (2 = spine, 3 = core). A *host* is what an adapter belongs to: a bound server, else
the host name its description or the node-name map gives. A *rail* is the set of leaves that
carry NIC k of every server ("rail-optimised": 8 NICs, 8 rails); a *leaf group* is the set
of leaves that serve the same servers (the rail leaves of one scalable unit), which is what
a scheduler sees as one leaf.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict, deque
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

TIER_NAMES = {1: "leaf", 2: "spine", 3: "core"}

# A switch's key: its name in the pure tests, its row id where the service applies a snapshot.
K = TypeVar("K", bound=Hashable)


def tier_name(tier: int | None) -> str:
    if tier is None:
        return ""
    return TIER_NAMES.get(tier, f"tier {tier}")


def host_key(server_id: int | None, host_name: str) -> str | None:
    """What an adapter belongs to: its bound server (`s<id>`), else its host name (`h<name>`)."""
    if server_id is not None:
        return f"s{server_id}"
    return f"h{host_name.lower()}" if host_name else None


@dataclass(frozen=True, slots=True)
class HostPort:
    """A host adapter's cable to a switch: which host, which NIC label, which switch."""

    adapter: str
    host: str | None
    nic: str
    switch: str
    gbps: float | None = None


# -- tiers ----------------------------------------------------------------------------


def infer_tiers(
    switches: Iterable[K],
    switch_links: Iterable[tuple[K, K]],
    hosts_per_switch: Mapping[K, int],
    overrides: Mapping[K, int] | None = None,
) -> dict[K, int | None]:
    """Tier of each switch: 1 for leaves, then one more per hop away from the nearest leaf.

    A leaf is a switch with host adapters, unless it looks like a spine that carries a
    stray host (a management or UFM server): most of its switch neighbours carry hosts and
    it carries far fewer than they do. A switch no leaf reaches has no tier (None). People's
    overrides are fixed points: an overridden leaf seeds the search, an overridden spine
    does not, and the result keeps every override as given.
    """
    overrides = dict(overrides or {})
    names = list(switches)
    neighbours: dict[K, set[K]] = {name: set() for name in names}
    for a, b in switch_links:
        if a != b and a in neighbours and b in neighbours:
            neighbours[a].add(b)
            neighbours[b].add(a)
    candidates = {name for name in names if hosts_per_switch.get(name, 0) > 0}
    leaves: set[K] = set()
    for name in candidates:
        near = [n for n in neighbours[name] if n in candidates]
        if near and len(near) * 2 >= len(neighbours[name]):
            counts = sorted(hosts_per_switch[n] for n in near)
            median = counts[len(counts) // 2]
            if hosts_per_switch[name] * 2 < median:
                continue  # a spine with a stray host
        leaves.add(name)
    leaves = {n for n in leaves if overrides.get(n, 1) == 1}
    leaves |= {n for n, tier in overrides.items() if tier == 1 and n in neighbours}

    tiers: dict[K, int | None] = dict.fromkeys(names)
    # Each queued switch with the tier it was given (a tier, once given, never changes here).
    queue: deque[tuple[K, int]] = deque()
    for name in leaves:
        tiers[name] = 1
        queue.append((name, 1))
    while queue:
        name, tier = queue.popleft()
        for other in neighbours[name]:
            if tiers[other] is None:
                given = overrides.get(other) or tier + 1
                tiers[other] = given
                queue.append((other, given))
    for name, tier in overrides.items():
        if name in tiers:
            tiers[name] = tier
    return tiers


# -- rails and leaf groups ------------------------------------------------------------

_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def _label_key(label: str) -> tuple[str, int]:
    m = _NUMBERED.match(label)
    return (m[1], int(m[2])) if m else (label, -1)


@dataclass(slots=True)
class RailLayout:
    """Rails by number (1..k), each leaf's rail, and the leaf groups (scalable units)."""

    rail_optimised: bool = False
    leaf_rail: dict[str, int] = field(default_factory=dict)
    rail_labels: dict[int, list[str]] = field(default_factory=dict)
    adapter_rail: dict[str, int] = field(default_factory=dict)
    nic_rail: dict[str, int] = field(default_factory=dict)
    leaf_group: dict[str, int] = field(default_factory=dict)
    groups: dict[int, list[str]] = field(default_factory=dict)

    @property
    def rails(self) -> dict[int, list[str]]:
        found: dict[int, list[str]] = defaultdict(list)
        for leaf, rail in sorted(self.leaf_rail.items()):
            found[rail].append(leaf)
        return dict(sorted(found.items()))


def detect_rails(ports: Iterable[HostPort], leaves: set[str]) -> RailLayout:
    """Rails and leaf groups from where each host's NICs are cabled.

    NIC k of a host is its k-th NIC label in the fabric's own naming scheme: the labels of
    one scheme (`HCA-1`, `HCA-2`, `HCA-5`, `HCA-6`; or `mlx5_0`, `mlx5_1`, `mlx5_4`, ...)
    sorted by number, so hosts named either way line up, and a host that lacks one NIC does
    not shift the others. Only hosts with two NICs or more count (a lone management NIC is
    on no rail). A leaf's rail is the rail most of its NICs are on (more than half). Leaf
    groups join leaves that share a host.

    `nic_rail` is the rail an adapter's NIC label names; `adapter_rail` the rail it is on:
    its leaf's, whenever that is known (the cable is the truth, so a NIC without a name, or
    one a management host names otherwise, is on its leaf's rail), else its label's. Where
    the two differ on a rail member, the wrong-rail finding (`rules.wrong_rail`) speaks.
    """
    ports = list(ports)
    by_host: dict[str, list[HostPort]] = defaultdict(list)
    for port in ports:
        if port.host is not None and port.switch in leaves:
            by_host[port.host].append(port)
    members = {host: got for host, got in by_host.items() if len({p.adapter for p in got}) > 1}
    schemes: dict[str, set[str]] = defaultdict(set)
    for got in members.values():
        for port in got:
            if port.nic:
                schemes[_label_key(port.nic)[0]].add(port.nic)
    rank = {
        label: position
        for labels in schemes.values()
        for position, label in enumerate(sorted(labels, key=_label_key), start=1)
    }
    layout = RailLayout()
    per_leaf: dict[str, Counter[int]] = defaultdict(Counter)
    for got in members.values():
        for port in got:
            rail = rank.get(port.nic)
            if rail is not None:
                layout.nic_rail[port.adapter] = rail
                per_leaf[port.switch][rail] += 1
    labels: dict[int, set[str]] = defaultdict(set)
    for label, rail in rank.items():
        labels[rail].add(label)
    for leaf, counts in per_leaf.items():
        rail, count = counts.most_common(1)[0]
        if count * 2 > sum(counts.values()):
            layout.leaf_rail[leaf] = rail
    cabled: dict[str, set[int]] = defaultdict(set)
    for port in ports:
        if port.switch in layout.leaf_rail:
            cabled[port.adapter].add(layout.leaf_rail[port.switch])
    for adapter in cabled.keys() | layout.nic_rail.keys():
        on = cabled.get(adapter, set())
        rail = next(iter(on)) if len(on) == 1 else layout.nic_rail.get(adapter)
        if rail is not None:
            layout.adapter_rail[adapter] = rail
    layout.rail_labels = {rail: sorted(found) for rail, found in sorted(labels.items())}
    spread = sum(
        1
        for got in members.values()
        if len({p.switch for p in got}) == len({p.adapter for p in got})
    )
    layout.rail_optimised = (
        len(set(layout.leaf_rail.values())) > 1 and spread * 2 > len(members) and bool(members)
    )
    _leaf_groups(layout, by_host, leaves)
    return layout


def _leaf_groups(layout: RailLayout, by_host: Mapping[str, list[HostPort]], leaves: set[str]):
    parent = {leaf: leaf for leaf in leaves}
    for got in by_host.values():
        if len({p.adapter for p in got}) < 2:
            continue
        first = _find(parent, got[0].switch)
        for port in got[1:]:
            other = _find(parent, port.switch)
            if other != first:
                parent[other] = first
    members: dict[str, list[str]] = defaultdict(list)
    for leaf in leaves:
        members[_find(parent, leaf)].append(leaf)
    ordered = sorted((sorted(group) for group in members.values()), key=lambda g: g[0])
    for number, group in enumerate(ordered, start=1):
        layout.groups[number] = group
        for leaf in group:
            layout.leaf_group[leaf] = number


def _find(parent: dict[str, str], x: str) -> str:
    """Union-find root of x (path halving); an unseen x is its own root."""
    parent.setdefault(x, x)
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


# -- domains for schedulers -------------------------------------------------------------


def tier_domains(
    tiers: Mapping[str, int | None],
    switch_links: Iterable[tuple[str, str]],
    leaf_group: Mapping[str, int],
) -> dict[int, dict[int, str]]:
    """For each tier t >= 2: leaf group -> the lowest-named tier-t switch of its domain.

    A tier-t domain is what the leaf groups reach through switches of tier t and below
    (spine domain, core domain): what Kubernetes topology labels name per node.
    """
    top = max((t for t in tiers.values() if t), default=1)
    links = [(a, b) for a, b in switch_links if tiers.get(a) and tiers.get(b)]
    result: dict[int, dict[int, str]] = {}
    for level in range(2, top + 1):
        parent: dict[str, str] = {}
        for a, b in links:
            if tiers[a] <= level and tiers[b] <= level:  # type: ignore[operator]
                ra, rb = _find(parent, a), _find(parent, b)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
        names: dict[str, str] = {}
        for switch, tier in tiers.items():
            if tier == level:
                root = _find(parent, switch)
                names[root] = min(names.get(root, switch), switch)
        result[level] = {
            group: names[_find(parent, leaf)]
            for leaf, group in sorted(leaf_group.items())
            if _find(parent, leaf) in names
        }
    return result


# -- bandwidth ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HostBandwidth:
    host: str
    nics: int
    gbps: float
    gpus: int | None

    @property
    def gbps_per_gpu(self) -> float | None:
        return round(self.gbps / self.gpus, 3) if self.gpus else None

    @property
    def nics_per_gpu(self) -> float | None:
        return round(self.nics / self.gpus, 3) if self.gpus else None


def host_bandwidth(ports: Iterable[HostPort], gpus: Mapping[str, int]) -> list[HostBandwidth]:
    """Network bandwidth per host (sum of its cables that are up), per GPU and NICs per GPU."""
    totals: dict[str, float] = defaultdict(float)
    nics: dict[str, set[str]] = defaultdict(set)
    for port in ports:
        if port.host is None:
            continue
        nics[port.host].add(port.adapter)
        totals[port.host] += port.gbps or 0.0
    return [
        HostBandwidth(host=host, nics=len(nics[host]), gbps=totals[host], gpus=gpus.get(host))
        for host in sorted(nics)
    ]


@dataclass(frozen=True, slots=True)
class LeafLoad(Generic[K]):
    """A leaf's bandwidth down to hosts and up to higher tiers; `ratio` > 1 is oversubscribed."""

    switch: K
    down_gbps: float
    up_gbps: float

    @property
    def ratio(self) -> float | None:
        return round(self.down_gbps / self.up_gbps, 3) if self.up_gbps else None


def switch_loads(
    tiers: Mapping[K, int | None],
    switch_links: Iterable[tuple[K, K, float | None]],
    adapter_links: Iterable[tuple[K, float | None]],
) -> dict[K, LeafLoad[K]]:
    """Down (to adapters and lower tiers) and up (to higher tiers) Gb/s of every switch."""
    down: dict[K, float] = defaultdict(float)
    up: dict[K, float] = defaultdict(float)
    for switch, gbps in adapter_links:
        down[switch] += gbps or 0.0
    for a, b, gbps in switch_links:
        ta, tb = tiers.get(a), tiers.get(b)
        if ta is None or tb is None or ta == tb:
            continue
        low, high = (a, b) if ta < tb else (b, a)
        up[low] += gbps or 0.0
        down[high] += gbps or 0.0
    return {
        switch: LeafLoad(
            switch=switch, down_gbps=down.get(switch, 0.0), up_gbps=up.get(switch, 0.0)
        )
        for switch in tiers
    }


# -- NVLink domains ----------------------------------------------------------------------


def nvlink_domains(
    gpus: Iterable[tuple[str, str, int | None]],
) -> dict[tuple[str, int | None], list[str]]:
    """NVLink domains (a GB200 NVL72 rack, ...): the hosts whose GPUs share one NVLink fabric
    `cluster_uuid` and `clique_id` (NVML's GPU fabric info), from (host, cluster uuid, clique
    id) per GPU. A host belongs to the domain most of its GPUs report (ties: the lowest uuid
    and clique); GPUs with no cluster uuid are on no domain, and a domain of one host is no
    domain between hosts. Domains in order of their first host."""
    votes: dict[str, Counter[tuple[str, int | None]]] = defaultdict(Counter)
    for host, cluster_uuid, clique_id in gpus:
        if cluster_uuid:
            votes[host][(cluster_uuid.lower(), clique_id)] += 1
    members: dict[tuple[str, int | None], list[str]] = defaultdict(list)
    for host in sorted(votes):
        top = max(votes[host].values())
        tied = [d for d, n in votes[host].items() if n == top]
        members[min(tied, key=lambda d: (d[0], -1 if d[1] is None else d[1]))].append(host)
    shared = {domain: hosts for domain, hosts in members.items() if len(hosts) > 1}
    return dict(sorted(shared.items(), key=lambda item: item[1][0]))
