"""Where the fabric meets the schedulers: the Slurm node name of each server on a fabric,
which fabric holds a cluster's servers, and the labels suggested for each Kubernetes node.
Reads only; fabric/ and clusters/ stay apart, this module joins them (topology/ may import
both)."""

from __future__ import annotations

import shlex
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from clusters.choices import ClusterKind
from clusters.models import Cluster, Node
from clusters.selectors import cluster_kind
from fabric.models import Adapter, Fabric
from fabric.selectors import fabric_server_labels


class FabricNamesError(ValueError):
    """A request the join cannot answer; `field` is the parameter at fault."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def _require_cluster_kind(cluster: str, kind: str, label: str) -> None:
    """Raise unless a cluster named `cluster` exists and is of `kind` (one query)."""
    found = cluster_kind(cluster)
    if found is None:
        raise FabricNamesError(f"no cluster named {cluster!r}", "cluster")
    if found != kind:
        raise FabricNamesError(f"{cluster!r} is not a {label} cluster", "cluster")


def _nodes_on(fabric: Fabric, kind: str, label: str, cluster: str | None) -> QuerySet[Node]:
    """The live nodes of one scheduler kind whose servers are on the fabric; of `cluster`
    alone when named (a field-level error when it is not of that kind)."""
    nodes = Node.objects.filter(
        kind=kind,
        gone_at__isnull=True,
        server__fabric_adapters__fabric=fabric,
        server__fabric_adapters__gone_at__isnull=True,
    )
    if cluster is None:
        return nodes
    _require_cluster_kind(cluster, kind, label)
    return nodes.filter(cluster__name=cluster)


def slurm_node_names(fabric: Fabric, cluster: str | None = None) -> tuple[str | None, dict]:
    """(the Slurm cluster used, {server id: its Slurm node name}) for the fabric's servers.

    With `cluster` named, that Slurm cluster; without, the one Slurm cluster that binds
    servers of this fabric (none: host names are used; several: the caller must choose).
    One query, however large the fabric.
    """
    rows = (
        _nodes_on(fabric, ClusterKind.SLURM, "Slurm", cluster)
        .values_list("cluster__name", "server_id", "name")
        .distinct()
    )
    per_cluster: dict[str, dict[int, str]] = defaultdict(dict)
    for cluster_name, server_id, name in rows:
        names = per_cluster[cluster_name]
        names[server_id] = min(names.get(server_id, name), name)
    if cluster is not None:
        return cluster, per_cluster.get(cluster, {})
    if not per_cluster:
        return None, {}
    if len(per_cluster) > 1:
        raise FabricNamesError(
            f"servers of fabric {fabric.name!r} are nodes of several Slurm clusters "
            f"({', '.join(sorted(per_cluster))}): name one with ?cluster=",
            "cluster",
        )
    ((name, names),) = per_cluster.items()
    return name, names


@dataclass(frozen=True, slots=True)
class SlurmExport:
    """Whom a Slurm export of a fabric lists: `cluster`'s nodes by their Slurm names
    (`names`, server id -> node name) and no other host (`named_only`); with no Slurm
    cluster on the fabric, host names, less the servers only another scheduler knows
    (`skip_servers`: a Kubernetes node's server is never a Slurm switch member)."""

    cluster: str | None
    names: dict[int, str]
    named_only: bool
    skip_servers: frozenset[int]


def slurm_export_names(fabric: Fabric, cluster: str | None = None) -> SlurmExport:
    """Who a Slurm topology.conf / topology.yaml of the fabric lists (see `SlurmExport`):
    the Slurm cluster named, else the one that binds servers of the fabric (several: a
    field-level error, as `slurm_node_names`), else host names less the servers bound to
    another scheduler's nodes. One query, two with no Slurm cluster on the fabric."""
    used, names = slurm_node_names(fabric, cluster)
    if used is not None:
        return SlurmExport(used, names, True, frozenset())
    others = (
        Node.objects.filter(
            gone_at__isnull=True,
            server__fabric_adapters__fabric=fabric,
            server__fabric_adapters__gone_at__isnull=True,
        )
        .exclude(kind=ClusterKind.SLURM)
        .values_list("server_id", flat=True)
        .distinct()
    )
    return SlurmExport(None, {}, False, frozenset(others))


def fabric_schedulers() -> dict[str, dict[str, list[str]]]:
    """Fabric name -> scheduler kind -> the clusters with a live node on a server of that
    fabric (sorted), for the fabric page's export buttons. One query, however many
    fabrics."""
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for fabric, kind, cluster in (
        Node.objects.filter(
            gone_at__isnull=True,
            server__fabric_adapters__gone_at__isnull=True,
            server__fabric_adapters__fabric__isnull=False,
        )
        .values_list("server__fabric_adapters__fabric__name", "kind", "cluster__name")
        .distinct()
    ):
        found[fabric][kind].add(cluster)
    return {
        fabric: {kind: sorted(clusters) for kind, clusters in kinds.items()}
        for fabric, kinds in found.items()
    }


def cluster_fabric(cluster: Cluster, fabric: str | None = None) -> Fabric:
    """The fabric named, else the one that holds most of the cluster's bound servers."""
    if fabric is not None:
        found = Fabric.objects.filter(name=fabric).first()
        if found is None:
            raise FabricNamesError(f"no fabric named {fabric!r}", "fabric")
        return found
    counts = Counter(
        Adapter.objects.filter(
            gone_at__isnull=True,
            server__nodes__cluster=cluster,
            server__nodes__gone_at__isnull=True,
        )
        .values_list("fabric_id", "server_id")
        .distinct()
        .values_list("fabric_id", flat=True)
    )
    if not counts:
        raise FabricNamesError(
            f"no fabric holds servers of {cluster.name!r}: name one with ?fabric=", "fabric"
        )
    return Fabric.objects.get(pk=counts.most_common(1)[0][0])


def kubernetes_node_labels(fabric: Fabric, cluster: str | None = None) -> list[dict[str, Any]]:
    """Each live Kubernetes node whose server is on the fabric, with the node labels
    suggested for its switch tiers (`fabric.selectors.fabric_server_labels`), those its own
    labels lack or carry with another value (`to_set`), and the kubectl line that sets them.

    With `cluster` named, that Kubernetes cluster's nodes only. Four queries (five with a
    cluster named), however large the fabric.
    """
    rows = (
        _nodes_on(fabric, ClusterKind.KUBERNETES, "Kubernetes", cluster)
        .values_list("id", "cluster__name", "name", "server_id", "server__hostname", "labels")
        .distinct()
        .order_by("cluster__name", "name")
    )
    suggested = fabric_server_labels(fabric)
    answer = []
    for node_id, cluster_name, name, server_id, hostname, own in rows:
        labels = suggested.get(server_id)
        if not labels:
            continue
        answer.append(
            {
                "node": name,
                "node_id": node_id,
                "cluster": cluster_name,
                "server": server_id,
                "server_hostname": hostname,
                **_to_set(name, labels, own),
            }
        )
    return answer


def node_fabric_labels(node: Node) -> list[dict[str, Any]]:
    """For the node page: per fabric its server is on, the labels suggested for its switch
    tiers, those its own labels lack or carry with another value, and the kubectl line;
    `rows` is (label, suggested value, the node's own value or None) per label.

    Only a live Kubernetes node bound to a server has any. One query, plus three per fabric
    the server is on (a server sits on one or two), however large the fleet.
    """
    if node.kind != ClusterKind.KUBERNETES or node.server_id is None or node.gone_at:
        return []
    fabrics = Fabric.objects.filter(
        adapters__server_id=node.server_id, adapters__gone_at__isnull=True
    ).distinct()
    answer = []
    for fabric in fabrics.order_by("name"):
        labels = fabric_server_labels(fabric, node.server_id).get(node.server_id)
        if labels:
            own = node.labels if isinstance(node.labels, dict) else {}
            rows = [(key, value, own.get(key)) for key, value in labels.items()]
            answer.append({"fabric": fabric.name, "rows": rows, **_to_set(node.name, labels, own)})
    return answer


def _to_set(node: str, labels: dict[str, str], own: object) -> dict[str, Any]:
    """The suggested labels, those the node's own labels lack or disagree with, and the
    kubectl line that sets them (node name and values shell-quoted)."""
    mine = own if isinstance(own, dict) else {}
    to_set = {key: value for key, value in labels.items() if mine.get(key) != value}
    words = [f"{key}={value}" for key, value in sorted(to_set.items())]
    kubectl = shlex.join(["kubectl", "label", "node", node, *words, "--overwrite"]) if words else ""
    return {"labels": labels, "to_set": to_set, "kubectl": kubectl}


def kubectl_script(fabric: str, nodes: Sequence[Mapping[str, Any]], generated: str) -> str:
    """The `kubernetes_node_labels` answer as a shell script a person can read and run:
    per Kubernetes cluster, one `kubectl label node` line per node whose labels differ
    (node names and values shell-quoted), a comment for each node already labelled."""
    lines = [
        "#!/bin/sh",
        f"# Kubernetes node labels for the switch tiers of fabric {fabric}, by Cluster Atlas",
        f"# generated {generated}; run each cluster's lines with its kubectl context",
    ]
    if not nodes:
        lines.append("# no Kubernetes node is bound to a server on this fabric")
    cluster = None
    for node in nodes:
        if node["cluster"] != cluster:
            cluster = node["cluster"]
            lines += ["", f"# cluster {_comment(cluster)}"]
        if node["kubectl"]:
            lines.append(node["kubectl"])
        else:
            lines.append(f"# {_comment(node['node'])}: labels already set")
    return "\n".join(lines) + "\n"


def _comment(text: str) -> str:
    """Text safe on one comment line (no line break can end the comment)."""
    return " ".join(str(text).split())
