"""Reads the pod-device join needs: the device IDs pods hold, and the UUIDs nodes have.

Selector-free helpers for the pod intake: ``PodDevice`` rows are per server (the agent's
last report), and pods run on nodes, so both reads go through ``clusters.Node.server``.
Each is a fixed number of queries however many pods or nodes it is asked about.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from clusters.models import Cluster, Node
from clusters.parsers.records import PodRecord
from inventory.models import Gpu, MigDevice
from workloads.models import PodDevice
from workloads.parsers.pods import pods_to_workloads, requests_gpus
from workloads.pod_devices import PodKey, UnknownDevice, snapshot_with_devices
from workloads.records import JobsSnapshot

# Past this many pods the filter is by namespace alone (a long IN list costs more than the
# rows it saves, and SQLite caps the parameters of one statement).
_POD_FILTER_MAX = 500


def pod_devices_for(
    cluster: Cluster,
    pod_keys: Iterable[PodKey],
    *,
    nodes: Mapping[PodKey, str] | None = None,
) -> dict[PodKey, list[tuple[str, str]]]:
    """The (resource, device ID) pairs each of ``pod_keys`` holds, per the last report of the
    servers bound to the cluster's nodes; one query.

    ``nodes`` (pod -> node name, from the pod list) keeps only what the server bound to the
    pod's own node says: a pod that moved leaves rows on a server that stopped reporting.
    """
    wanted = set(pod_keys)
    if not wanted:
        return {}
    rows = PodDevice.objects.filter(
        server__nodes__cluster=cluster,
        server__nodes__gone_at__isnull=True,
        namespace__in=sorted({ns for ns, _ in wanted}),
    )
    if len(wanted) <= _POD_FILTER_MAX:
        rows = rows.filter(pod__in=sorted({pod for _, pod in wanted}))
    found: dict[PodKey, list[tuple[str, str]]] = {}
    seen: set[tuple[str, str, str, str]] = set()
    for namespace, pod, resource, device_id, node in rows.values_list(
        "namespace", "pod", "resource", "device_id", "server__nodes__name"
    ).order_by("namespace", "pod", "container", "device_id"):
        key = (namespace, pod)
        if key not in wanted or (nodes is not None and nodes.get(key, node) != node):
            continue
        if (namespace, pod, resource, device_id) in seen:
            continue
        seen.add((namespace, pod, resource, device_id))
        found.setdefault(key, []).append((resource, device_id))
    return found


def known_device_uuids(cluster: Cluster, node_names: Collection[str]) -> dict[str, set[str]]:
    """The GPU and MIG UUIDs of the server bound to each named node (a node bound to no
    server is absent: its devices cannot be checked); three queries."""
    servers: dict[int, list[str]] = {}
    for name, server_id in Node.objects.filter(
        cluster=cluster,
        name__in=sorted(set(node_names)),
        gone_at__isnull=True,
        server__isnull=False,
    ).values_list("name", "server_id"):
        servers.setdefault(server_id, []).append(name)
    known: dict[str, set[str]] = {name: set() for names in servers.values() for name in names}
    gpus = Gpu.objects.filter(server_id__in=servers).values_list("server_id", "uuid")
    migs = MigDevice.objects.filter(gpu__server_id__in=servers).values_list(
        "gpu__server_id", "uuid"
    )
    for server_id, uuid in [*gpus, *migs]:
        for name in servers[server_id]:
            known[name].add(uuid)
    return known


def pod_workloads(
    *, cluster: Cluster, pods: list[PodRecord]
) -> tuple[JobsSnapshot, tuple[UnknownDevice, ...]]:
    """A cluster's pod list as workloads with the device IDs its agents reported joined in,
    and the IDs no GPU or MIG device of their node's server has (for a finding or a
    rejection); five queries, for the apply to store."""
    snapshot = pods_to_workloads(pods)
    nodes: dict[PodKey, str] = {
        (p.namespace, p.name): p.node_name for p in pods if p.node_name and requests_gpus(p)
    }
    devices = pod_devices_for(cluster, nodes, nodes=nodes)
    if not devices:
        return snapshot, ()
    names = sorted(set(nodes.values()))
    known = known_device_uuids(cluster, names)
    sharing = dict(
        Node.objects.filter(cluster=cluster, name__in=names, gone_at__isnull=True)
        .exclude(sharing_strategy="")
        .values_list("name", "sharing_strategy")
    )
    return snapshot_with_devices(snapshot, devices, known, node_sharing=sharing)
