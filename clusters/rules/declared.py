"""Binding by declaration: the scheduler node an agent says its server is, and the findings
where two declarations, or a declaration and a person, disagree.

Pure: typed facts in, a server id or finding facts out, no queries. A declaration binds only
when it is one server's alone; a name two servers declare binds neither of them by
declaration (they fall back to the other methods) and is a finding, never a silent choice.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from findings.choices import FindingType, Severity
from findings.facts import FindingFact

from ..choices import BindingMethod, ClusterKind
from .types import Fleet, NodeFacts
from .words import scheduler_name

Declared = Mapping[tuple[str, str], tuple[int, ...]]
"""Server ids by (cluster kind, lower-case node name) they declare."""


class Declaring(Protocol):
    """What a declaration is read from: `ServerFacts` or the identity binding loads."""

    @property
    def id(self) -> int: ...
    @property
    def declared_kubernetes_node(self) -> str: ...
    @property
    def declared_slurm_node(self) -> str: ...


def node_key(kind: str, name: str) -> tuple[str, str]:
    """How a declaration and a node's name meet: kind and the name lower-case, trimmed."""
    return kind, (name or "").strip().lower()


def declared_index(servers: Iterable[Declaring]) -> dict[tuple[str, str], tuple[int, ...]]:
    """Each declared (kind, node name) with the servers declaring it, in id order."""
    found: dict[tuple[str, str], list[int]] = defaultdict(list)
    for s in servers:
        for kind, name in (
            (ClusterKind.KUBERNETES, s.declared_kubernetes_node),
            (ClusterKind.SLURM, s.declared_slurm_node),
        ):
            key = node_key(kind, name)
            if key[1]:
                found[key].append(s.id)
    return {key: tuple(sorted(ids)) for key, ids in found.items()}


def clusters_by_name(nodes: Iterable[NodeFacts]) -> Counter[tuple[str, str]]:
    """How many clusters of each kind hold a node of each (kind, lower-case name)."""
    return Counter(key for key, _ in {(node_key(n.kind, n.name), n.cluster_id) for n in nodes})


def declared_server(
    node: NodeFacts, declared: Declared, clusters_named: int, matched: Sequence[int]
) -> int | None:
    """The server that declared this node, when it binds by that: one server declares the
    node's name, and either one cluster of its kind holds that name or the node's own identity
    facts (`matched`: the servers its UUID, machine-id, names or addresses point at) name that
    server too. An agent knows its node's name, not its cluster's: with `gpu1` in two
    Kubernetes clusters, a declaration alone cannot say which `gpu1` it is."""
    found = declared.get(node_key(node.kind, node.name), ())
    if len(found) != 1:
        return None
    if clusters_named <= 1 or found[0] in matched:
        return found[0]
    return None


def node_declared_twice(fleet: Fleet) -> list[FindingFact]:
    """Two servers or more declaring one node name of one kind: a copied configuration, a
    wrong `--kubernetes-node-name`/`--slurm-node-name`, or a reinstalled server beside its old
    record. Neither gets the node by declaration (`declared:<kind>:<name>`)."""
    found = []
    for (kind, name), ids in sorted(declared_index(fleet.servers.values()).items()):
        if len(ids) < 2:
            continue
        names = sorted(fleet.servers[i].hostname for i in ids)
        nodes = [n for n in fleet.nodes if node_key(n.kind, n.name) == (kind, name)]
        found.append(
            FindingFact(
                FindingType.NODE_DECLARED_TWICE,
                Severity.WARNING,
                f"declared:{kind}:{name}",
                f"{', '.join(names)} each declare they are the {scheduler_name(kind)} node "
                f"{name}: none is bound to it by that; fix the agents' node names",
                server_id=ids[0],
                node_id=nodes[0].id if len(nodes) == 1 else None,
                cluster_id=nodes[0].cluster_id if len(nodes) == 1 else None,
                details={"servers": names, "node": name, "kind": kind},
            )
        )
    return found


def declared_node_conflict(fleet: Fleet) -> list[FindingFact]:
    """A node a person bound to one server that another server's agent declares it is: the
    binding by hand stands, and someone should say which is right (`node:<id>`)."""
    declared = declared_index(fleet.servers.values())
    found = []
    for node in fleet.nodes:
        if node.binding_method != BindingMethod.MANUAL or not node.server_id:
            continue
        others = [
            i for i in declared.get(node_key(node.kind, node.name), ()) if i != node.server_id
        ]
        if not others:
            continue
        names = sorted(_hostname(fleet, i) for i in others)
        found.append(
            FindingFact(
                FindingType.DECLARED_NODE_CONFLICT,
                Severity.WARNING,
                node.subject,
                f"{node.label}: bound by hand to {_hostname(fleet, node.server_id)}, "
                f"but {', '.join(names)} declare{'s' if len(names) == 1 else ''} to be it; "
                "the binding by hand stands: unbind it or fix the agent's node name",
                node_id=node.id,
                cluster_id=node.cluster_id,
                server_id=others[0],
                details={
                    "bound_to": _hostname(fleet, node.server_id),
                    "declared_by": names,
                },
            )
        )
    return found


def _hostname(fleet: Fleet, server_id: int) -> str:
    server = fleet.servers.get(server_id)
    return server.hostname if server else f"server {server_id}"
