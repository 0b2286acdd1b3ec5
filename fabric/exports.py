"""Fabric topology for schedulers: Slurm's topology.conf and topology.yaml (tree), Kubernetes
node labels, and reading a Slurm topology.conf back. Pure: plain facts in, text or dicts out.

Node names are the caller's: the Slurm cluster's own names where a server is bound to a
Slurm node, else a host name (the layer that knows both, topology/, supplies them). The
rail leaves of one scalable unit serve the same servers, so a scheduler sees them as one
leaf switch: they are written as one switch (`su1`, ...), with a comment naming the real
leaves; a fabric without rails keeps one switch per leaf under its own name.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import hostlist
import yaml

from .graph import tier_domains
from .parsers.records import FabricFormatError, guid_of

SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
LABEL_PREFIX = "network.topology.nvidia.com/"  # the keys NVIDIA's topograph labels nodes with
LABEL_VALUE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_switch_name(name: str) -> str:
    """A name Slurm reads as one switch: letters, digits, `_ . -` (others become `_`)."""
    return SAFE_NAME.sub("_", name.strip()).strip("_") or "switch"


@dataclass(slots=True)
class TreeFacts:
    """A fabric's switch tree: each switch's name and tier, the switch-to-switch cables,
    the hosts on each leaf, and the leaf groups (scalable units) from rail detection."""

    switches: dict[str, tuple[str, int | None]]
    switch_links: list[tuple[str, str]]
    leaf_hosts: dict[str, set[str]]
    leaf_group: dict[str, int] = field(default_factory=dict)
    unnamed: dict[str, str] = field(default_factory=dict)
    """Host key -> GUID, for the host adapters known by their GUID alone (no host name)."""


@dataclass(slots=True)
class SchedulerTree:
    """A tree topology as a scheduler holds it: switch -> node names / child switch names."""

    nodes: dict[str, list[str]] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)
    unlisted: list[tuple[str, str]] = field(default_factory=list)
    """(switch, why): switches left out or listed short, and why, for comments."""
    unnamed: list[str] = field(default_factory=list)
    """GUIDs of the host adapters left out for want of a name."""
    left_out: int = 0
    """Named hosts left out on purpose: not nodes of the scheduler the file is for."""

    def leaf_of(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = defaultdict(list)
        for switch, names in self.nodes.items():
            for name in names:
                found[name].append(switch)
        return dict(found)


def scheduler_tree(facts: TreeFacts, node_names: Mapping[str, str]) -> tuple[SchedulerTree, dict]:
    """The tree a scheduler should get, and a note per merged switch (its real leaves).

    Hosts without a name in `node_names` are left out; a switch left with nothing under it
    is left out too, and so are switches no leaf reaches (no tier). Each is said in
    `tree.unlisted` with why (a leaf whose host adapters are known by GUID alone names
    them), and a listed leaf that leaves GUID-only adapters out says so too.
    """
    used: set[str] = set()

    def unique(name: str) -> str:
        base, n = safe_switch_name(name), 1
        candidate = base
        while candidate in used:
            n += 1
            candidate = f"{base}-{n}"
        used.add(candidate)
        return candidate

    leaves = sorted(k for k, (_, tier) in facts.switches.items() if tier == 1)
    grouped: dict[int | str, list[str]] = defaultdict(list)
    for leaf in leaves:
        grouped[facts.leaf_group.get(leaf, leaf)].append(leaf)
    tree = SchedulerTree()
    notes: dict[str, list[str]] = {}
    name_of: dict[str, str] = {}  # switch key -> the scheduler switch that stands for it
    order = sorted(grouped.values(), key=lambda members: facts.switches[members[0]][0])
    number = 0
    unnamed: set[str] = set()
    for members in order:
        hosts = {h for leaf in members for h in facts.leaf_hosts.get(leaf, ())}
        names = sorted({node_names[h] for h in hosts if h in node_names})
        guids = sorted(
            facts.unnamed[h] for h in hosts if h in facts.unnamed and h not in node_names
        )
        unnamed.update(guids)
        if not names:
            for leaf in members:
                tree.unlisted.append(
                    (facts.switches[leaf][0], _why_unlisted(facts, leaf, node_names))
                )
            continue
        if len(members) == 1:
            switch = unique(facts.switches[members[0]][0])
        else:
            number += 1
            switch = unique(f"su{number}")
            notes[switch] = sorted(facts.switches[m][0] for m in members)
        if guids:
            tree.unlisted.append(
                (
                    switch,
                    f"{len(guids)} host adapter(s) known by GUID alone are left out "
                    f"({_guids(guids)}): {NAMELESS}",
                )
            )
        tree.nodes[switch] = names
        for member in members:
            name_of[member] = switch

    neighbours: dict[str, set[str]] = defaultdict(set)
    for a, b in facts.switch_links:
        neighbours[a].add(b)
        neighbours[b].add(a)
    top = max((t for _, t in facts.switches.values() if t), default=1)
    for level in range(2, top + 1):
        upper = sorted(
            (k for k, (_, t) in facts.switches.items() if t == level),
            key=lambda k: facts.switches[k][0],
        )
        for key in upper:
            below = {
                name_of[n]
                for n in neighbours[key]
                if facts.switches.get(n, ("", None))[1] == level - 1 and n in name_of
            }
            if below:
                switch = unique(facts.switches[key][0])
                tree.children[switch] = sorted(below)
                name_of[key] = switch
            else:
                tree.unlisted.append(
                    (facts.switches[key][0], "not listed: none of the switches under it is listed")
                )
    for name, tier in sorted(facts.switches.values(), key=lambda row: row[0]):
        if tier is None:
            tree.unlisted.append((name, "not listed: no tier (no leaf switch reaches it)"))
    tree.unnamed = sorted(unnamed)
    return tree, notes


NAMELESS = "no node-name map entry, node description or bound server names them"


def _guids(guids: list[str]) -> str:
    """The first GUIDs of a list, as a person would look them up."""
    return ", ".join(f"0x{g}" for g in guids[:3]) + (", ..." if len(guids) > 3 else "")


def _why_unlisted(facts: TreeFacts, leaf: str, node_names: Mapping[str, str]) -> str:
    hosts = facts.leaf_hosts.get(leaf, set())
    guids = sorted(facts.unnamed[h] for h in hosts if h in facts.unnamed and h not in node_names)
    if guids:
        return (
            f"not listed: its {len(guids)} host adapter(s) are known by GUID alone "
            f"({_guids(guids)}): {NAMELESS}"
        )
    if hosts:
        return "not listed: none of its hosts has a node name"
    return "not listed: no host adapter is cabled to it"


def no_nodes_reason(tree: SchedulerTree, fabric: str, cluster: str | None = None) -> str:
    """Why a tree lists no node at all: a topology.conf without `Nodes=` would leave
    slurmctld's topology/tree plugin with no tree, so none is written (the caller answers
    409 with this). `cluster`: the Slurm cluster the file was asked for."""
    if tree.left_out and not tree.unnamed:
        whose = f"Slurm cluster {cluster}" if cluster else "a Slurm cluster"
        return (
            f"fabric {fabric} has no node of {whose}: its {tree.left_out} named host(s) "
            "are no Slurm node bound to a server on it (hosts only Kubernetes knows are "
            "never listed); bind the Slurm nodes to their servers, or name the cluster "
            "with ?cluster="
        )
    if tree.unnamed:
        return (
            f"fabric {fabric} has no node Slurm can be given: its {len(tree.unnamed)} host "
            f"adapter(s) are known by GUID alone ({_guids(tree.unnamed)}): {NAMELESS}; "
            f"name them with a node-name map (PUT "
            f"/api/v1/fabrics/{fabric}/node-name-map/), node descriptions (rdma-ndd), or "
            "agents on their servers that report the adapters' GUIDs"
        )
    return (
        f"fabric {fabric} has no node Slurm can be given: no leaf switch has a host adapter "
        "with a name cabled to it"
    )


def slurm_topology_conf(tree: SchedulerTree, notes: Mapping[str, list[str]], header: str) -> str:
    """Slurm's topology/tree file: `SwitchName=... Nodes=...` / `SwitchName=... Switches=...`."""
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"# {switch}: {why}" for switch, why in tree.unlisted]
    for switch, names in tree.nodes.items():
        if switch in notes:
            lines.append(f"# {switch}: leaves {', '.join(notes[switch])}")
        lines.append(f"SwitchName={switch} Nodes={hostlist.collect_hostlist(names)}")
    for switch, children in tree.children.items():
        lines.append(f"SwitchName={switch} Switches={hostlist.collect_hostlist(children)}")
    return "\n".join(lines) + "\n"


def slurm_topology_yaml(
    tree: SchedulerTree,
    name: str,
    header: str,
    blocks: Iterable[tuple[str, list[str]]] = (),
) -> str:
    """Slurm 24.11+'s topology.yaml: the tree topology, the cluster default; and, where the
    fabric's servers share NVLink domains (`blocks`: (domain id, node names)), a block
    topology `<name>-nvlink` of one block per domain, for partitions that name it."""
    switches: list[dict[str, str]] = [
        {"switch": switch, "nodes": hostlist.collect_hostlist(names)}
        for switch, names in tree.nodes.items()
    ]
    switches += [
        {"switch": switch, "children": hostlist.collect_hostlist(children)}
        for switch, children in tree.children.items()
    ]
    document: list[dict] = [
        {
            "topology": safe_switch_name(name),
            "cluster_default": True,
            "tree": {"switches": switches},
        }
    ]
    lines = header.splitlines() + [f"{switch}: {why}" for switch, why in tree.unlisted]
    listed = [(domain, names) for domain, names in blocks if names]
    if listed:
        document.append(
            {
                "topology": f"{safe_switch_name(name)}-nvlink",
                "block": {
                    "blocks": [
                        {"block": f"nvl{number}", "nodes": hostlist.collect_hostlist(names)}
                        for number, (_, names) in enumerate(listed, start=1)
                    ]
                },
            }
        )
        lines += [
            f"nvl{number}: NVLink domain {domain}"
            for number, (domain, _) in enumerate(listed, start=1)
        ]
    comment = "".join(f"# {line}\n" for line in lines)
    return comment + yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def kubernetes_labels(
    host_leaf_switch: Mapping[str, str], host_domains: Mapping[str, Mapping[int, str]]
) -> dict[str, dict[str, str]]:
    """Suggested node labels per host: leaf, spine and core domains (topograph's keys)."""
    labels: dict[str, dict[str, str]] = {}
    for host, leaf in host_leaf_switch.items():
        mine = {f"{LABEL_PREFIX}leaf": _label_value(leaf)}
        for level, name in sorted(host_domains.get(host, {}).items()):
            key = {2: "spine", 3: "core"}.get(level, f"tier{level}")
            mine[f"{LABEL_PREFIX}{key}"] = _label_value(name)
        labels[host] = mine
    return labels


def host_labels(
    switches: Mapping[str, tuple[str, int | None, int | None]],
    switch_links: Iterable[tuple[str, str]],
    host_leaves: Mapping[str, Iterable[str]],
) -> dict[str, dict[str, str]]:
    """Suggested node labels per host from the switch tree: `switches` is key -> (name,
    tier, leaf group), `host_leaves` the switches each host's NICs are cabled to.

    A host's leaf is the first by name of its leaves (tier 1); its spine and core are the
    domains its leaf group reaches (`graph.tier_domains`), named by their lowest-named
    switch, so every host of one domain carries the same value. A host on no leaf gets none.
    """
    # Keys that sort by name, so that a domain's "lowest" switch is the lowest-named one.
    named = {key: f"{name}\x00{key}" for key, (name, _tier, _group) in switches.items()}
    switches = {named[key]: facts for key, facts in switches.items()}
    switch_links = [(named[a], named[b]) for a, b in switch_links if a in named and b in named]
    host_leaves = {
        host: [named[k] for k in keys if k in named] for host, keys in host_leaves.items()
    }
    leaves = {key for key, (_, tier, _group) in switches.items() if tier == 1}
    groups: dict[str, int] = {}
    for number, key in enumerate(sorted(leaves), start=1):
        group = switches[key][2]
        groups[key] = group if group else -number  # a leaf without a group is its own
    domains = tier_domains({k: tier for k, (_, tier, _g) in switches.items()}, switch_links, groups)
    leaf_of: dict[str, str] = {}
    host_domains: dict[str, dict[int, str]] = {}
    for host, cabled in host_leaves.items():
        mine = sorted(k for k in cabled if k in leaves)
        if not mine:
            continue
        leaf_of[host] = switches[mine[0]][0]
        group = groups[mine[0]]
        host_domains[host] = {
            level: switches[by_group[group]][0]
            for level, by_group in domains.items()
            if group in by_group
        }
    return kubernetes_labels(leaf_of, host_domains)


def _label_value(name: str) -> str:
    value = LABEL_VALUE.sub("-", name).strip("-_.")[:63].strip("-_.")
    return value or "unnamed"


# -- reading a scheduler's topology.conf -----------------------------------------------

_KEYS = {"switchname", "switches", "nodes", "linkspeed"}


def parse_topology_conf(text: str) -> SchedulerTree:
    """A Slurm topology.conf (tree plugin) -> SchedulerTree; FabricFormatError with the line.

    Keys are case-insensitive, `#` starts a comment, a trailing backslash continues a line,
    hostlists are expanded (bounded by python-hostlist's own size limit).
    """
    tree = SchedulerTree()
    logical: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].rstrip()
        if pending:
            line = pending + " " + line.lstrip()
        else:
            start = number
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        pending = ""
        if line.strip():
            logical.append((start, line.strip()))
    for number, line in logical:
        fields: dict[str, str] = {}
        for word in line.split():
            key, sep, value = word.partition("=")
            if not sep or key.lower() not in _KEYS:
                if key.lower() in {"blockname", "blocksizes"}:
                    raise FabricFormatError(
                        f"line {number}: a block topology (topology/block) is not compared yet"
                    )
                raise FabricFormatError(f"line {number}: {word!r} is not a topology.conf setting")
            fields[key.lower()] = value
        name = fields.get("switchname")
        if not name:
            raise FabricFormatError(f"line {number}: every line names a SwitchName=")
        if name in tree.nodes or name in tree.children:
            raise FabricFormatError(f"line {number}: switch {name!r} is defined twice")
        try:
            if "nodes" in fields:
                tree.nodes[name] = hostlist.expand_hostlist(fields["nodes"])
            if "switches" in fields:
                tree.children[name] = hostlist.expand_hostlist(fields["switches"])
        except hostlist.BadHostlist as exc:
            raise FabricFormatError(f"line {number}: bad hostlist ({exc})") from None
        if name not in tree.nodes and name not in tree.children:
            raise FabricFormatError(f"line {number}: switch {name!r} has no Nodes= or Switches=")
    if not tree.nodes:
        raise FabricFormatError("no switch with Nodes=: not a tree topology.conf")
    return tree


def leaf_groups_of(tree: SchedulerTree) -> dict[str, set[str]]:
    """Leaf switch -> its node names."""
    return {switch: set(names) for switch, names in tree.nodes.items()}


def names_of(items: Iterable[str]) -> str:
    """Node names for a message: a hostlist, then the names that spell GUIDs one by one
    (a hostlist would cut a GUID's hex into a range)."""
    names = sorted(set(items))
    guids = [n for n in names if guid_of(n) is not None]
    others = [n for n in names if guid_of(n) is None]
    return ",".join(([hostlist.collect_hostlist(others)] if others else []) + guids)
