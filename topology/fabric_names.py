"""Where the fabric meets the schedulers: the Slurm node name of each server on a fabric,
and which fabric holds a cluster's servers. Reads only; fabric/ and clusters/ stay apart,
this module joins them (topology/ may import both)."""

from __future__ import annotations

from collections import Counter, defaultdict

from clusters.choices import ClusterKind
from clusters.models import Cluster, Node
from fabric.models import Adapter, Fabric


class FabricNamesError(ValueError):
    """A request the join cannot answer; `field` is the parameter at fault."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def slurm_node_names(fabric: Fabric, cluster: str | None = None) -> tuple[str | None, dict]:
    """(the Slurm cluster used, {server id: its Slurm node name}) for the fabric's servers.

    With `cluster` named, that Slurm cluster; without, the one Slurm cluster that binds
    servers of this fabric (none: host names are used; several: the caller must choose).
    One query, however large the fabric.
    """
    if cluster is not None:
        found = Cluster.objects.filter(name=cluster).values_list("kind", flat=True).first()
        if found is None:
            raise FabricNamesError(f"no cluster named {cluster!r}", "cluster")
        if found != ClusterKind.SLURM:
            raise FabricNamesError(f"{cluster!r} is not a Slurm cluster", "cluster")
    rows = (
        Node.objects.filter(
            kind=ClusterKind.SLURM,
            gone_at__isnull=True,
            server__fabric_adapters__fabric=fabric,
            server__fabric_adapters__gone_at__isnull=True,
        )
        .values_list("cluster__name", "server_id", "name")
        .distinct()
    )
    if cluster is not None:
        rows = rows.filter(cluster__name=cluster)
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
