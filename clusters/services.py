"""Writes of the scheduler layer: snapshots in, node sets replaced, bindings set by people."""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from inventory.models import Server
from inventory.services import revision_bump

from .choices import BindingMethod, ClusterKind
from .models import Cluster, Node
from .parsers import (
    NodeRecord,
    Snapshot,
    SnapshotFormatError,
    decode_snapshot,
    parse_document,
    parse_pods,
    parse_snapshot,
)

logger = logging.getLogger(__name__)

NODE_FIELDS = [
    "kind",
    "hostname",
    "addresses",
    "system_uuid",
    "machine_id",
    "state",
    "raw_state",
    "state_flags",
    "ready",
    "schedulable",
    "reason",
    "taints",
    "partitions",
    "cpus",
    "memory_bytes",
    "gpu_capacity",
    "gpu_allocatable",
    "gpu_used",
    "gres",
    "resources",
    "mig_resources",
    "gpu_product",
    "gpu_replicas",
    "sharing_strategy",
    "mig_strategy",
    "mig_config",
    "labels",
    "versions",
    "last_seen",
    "gone_at",
]
VERSION_FIELDS = (
    "kubelet_version",
    "container_runtime",
    "os_image",
    "kernel_version",
    "architecture",
    "slurm_version",
    "os",
    "driver_version",
    "cuda_version",
)
KEPT_LABEL_PREFIXES = (
    "nvidia.com/",
    "kubernetes.io/",
    "node.kubernetes.io/",
    "topology.kubernetes.io/",
)


class SnapshotRejected(Exception):
    """A snapshot that cannot be taken; the cluster's node set stays as it was."""

    def __init__(self, message: str, field: str = "body") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class SnapshotResult:
    cluster: str
    kind: str
    format: str
    nodes: int
    added: int
    gone: int
    pods: int | None = None


def cluster_name_valid(name: str) -> bool:
    return bool(name) and slugify(name) == name and len(name) <= 100


def snapshot_ingest(*, cluster_name: str, raw: bytes | str) -> SnapshotResult:
    """Take a raw scheduler snapshot (the tool's own output) for a cluster.

    Node snapshots replace the node set (absent nodes are marked gone, not deleted); a
    `kubectl get pods -A -o json` snapshot sets the GPUs in use per Kubernetes node. A name
    not yet known creates the cluster, its kind taken from the format.
    """
    _check_name(cluster_name)
    document = _json_object(raw)
    if document is not None:  # decoded once, whatever it turns out to be
        return snapshot_ingest_document(cluster_name=cluster_name, document=document)
    try:
        snapshot = parse_snapshot(raw)
    except SnapshotFormatError as exc:
        raise SnapshotRejected(str(exc)) from None
    return _nodes_ingest(cluster_name, snapshot)


def snapshot_ingest_document(*, cluster_name: str, document: dict[str, Any]) -> SnapshotResult:
    """The same for JSON a pull already decoded (a NodeList, a PodList, a slurmrestd answer)."""
    _check_name(cluster_name)
    if _is_pod_list(document):
        return _pods_ingest(cluster_name, document)
    try:
        snapshot = parse_document(document)
    except SnapshotFormatError as exc:
        raise SnapshotRejected(str(exc)) from None
    return _nodes_ingest(cluster_name, snapshot)


def _check_name(cluster_name: str) -> None:
    if not cluster_name_valid(cluster_name):
        raise SnapshotRejected(
            "a cluster name is lower-case letters, digits, '-' and '_' (at most 100)", "name"
        )


def _nodes_ingest(cluster_name: str, snapshot: Snapshot) -> SnapshotResult:
    now = timezone.now()
    with transaction.atomic():
        cluster = _cluster_for(cluster_name, snapshot.kind)
        added, gone = node_set_replace(cluster=cluster, records=snapshot.nodes, now=now)
        Cluster.objects.filter(pk=cluster.pk).update(
            last_snapshot_format=snapshot.format,
            source_version=snapshot.source_version or "",
            last_sync_at=now,
            last_success_at=now,
            last_error="",
        )
        revision_bump(name="nodes")
    return SnapshotResult(
        cluster=cluster.name,
        kind=cluster.kind,
        format=snapshot.format,
        nodes=len(snapshot.nodes),
        added=added,
        gone=gone,
    )


def _cluster_for(name: str, kind: str) -> Cluster:
    cluster, _ = Cluster.objects.select_for_update().get_or_create(
        name=name, defaults={"kind": kind}
    )
    if cluster.kind != kind:
        raise SnapshotRejected(
            f"cluster {name!r} is a {cluster.get_kind_display()} cluster; this is a {kind} snapshot"
        )
    return cluster


def _node_row(cluster: Cluster, record: NodeRecord, now) -> Node:
    labels = {k: v for k, v in record.labels.items() if k.startswith(KEPT_LABEL_PREFIXES)}
    versions = {k: getattr(record, k) for k in VERSION_FIELDS if getattr(record, k, None)}
    return Node(
        cluster=cluster,
        name=record.name,
        kind=record.kind,
        hostname=record.hostname or "",
        addresses=list(record.addresses),
        system_uuid=(record.system_uuid or "").lower(),
        machine_id=(record.machine_id or "").lower(),
        state=record.state,
        raw_state=(record.raw_state or "")[:200],
        state_flags=list(record.state_flags),
        ready=record.ready,
        schedulable=record.schedulable,
        reason=record.reason or "",
        taints=list(record.taints),
        partitions=list(record.partitions),
        cpus=record.cpus,
        memory_bytes=record.memory_bytes,
        gpu_capacity=record.gpu_capacity,
        gpu_allocatable=record.gpu_allocatable,
        gpu_used=record.gpu_used,
        gres=list(record.gres),
        resources=dict(record.resources),
        mig_resources=dict(record.mig_resources),
        gpu_product=record.gpu_product or "",
        gpu_replicas=record.gpu_replicas,
        sharing_strategy=record.sharing_strategy or "",
        mig_strategy=record.mig_strategy or "",
        mig_config=record.mig_config or "",
        labels=labels,
        versions=versions,
        first_seen=now,
        last_seen=now,
        gone_at=None,
    )


def node_set_replace(*, cluster: Cluster, records: list[NodeRecord], now) -> tuple[int, int]:
    """Upsert the records as the cluster's node set; nodes not in it are marked gone.

    Bindings are left to reconciliation. Returns (nodes added, nodes gone). Kubernetes'
    gpu_used comes from pods, not from the node list, so a node list keeps what the last pod
    snapshot said.
    """
    names = [r.name for r in records]
    known = set(Node.objects.filter(cluster=cluster).values_list("name", flat=True))
    rows = [_node_row(cluster, r, now) for r in records]
    fields = NODE_FIELDS
    if cluster.kind == ClusterKind.KUBERNETES:
        fields = [f for f in NODE_FIELDS if f != "gpu_used"]
    Node.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["cluster", "name"],
        update_fields=fields,
        batch_size=2000,
    )
    gone = Node.objects.filter(cluster=cluster, gone_at__isnull=True, last_seen__lt=now).update(
        gone_at=now
    )
    return len(set(names) - known), gone


def _json_object(raw: bytes | str) -> dict[str, Any] | None:
    """The body as a JSON object, or None: text formats and broken JSON go to the parsers,
    whose errors say what is wrong."""
    try:
        raw = decode_snapshot(raw)  # a BOM before "{" too
    except SnapshotFormatError:
        return None
    if raw.lstrip()[:1] != "{":
        return None
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return document if isinstance(document, dict) else None


def _is_pod_list(document: dict[str, Any]) -> bool:
    """`kubectl get pods -A -o json` (a List of Pods), the API's PodList, or one Pod."""
    if document.get("kind") in ("PodList", "Pod"):
        return True
    items = document.get("items")
    return (
        document.get("kind") == "List"
        and isinstance(items, list)
        and bool(items)
        and all(isinstance(i, dict) and i.get("kind") == "Pod" for i in items)
    )


def _pods_ingest(cluster_name: str, document: dict[str, Any]) -> SnapshotResult:
    try:
        pods = parse_pods(document)
    except SnapshotFormatError as exc:
        raise SnapshotRejected(str(exc)) from None
    gpu_used: Counter[str] = Counter()
    mig_used: dict[str, Counter[str]] = {}
    for pod in pods:
        if not pod.holds_resources or not pod.node_name:
            continue
        gpu_used[pod.node_name] += pod.gpu_requests
        for profile, count in pod.mig_requests.items():
            mig_used.setdefault(pod.node_name, Counter())[profile] += count
    with transaction.atomic():
        cluster = Cluster.objects.filter(name=cluster_name).first()
        if cluster is None or cluster.kind != ClusterKind.KUBERNETES:
            raise SnapshotRejected(
                f"post the node list of Kubernetes cluster {cluster_name!r} before its pods"
            )
        nodes = list(Node.objects.filter(cluster=cluster, gone_at__isnull=True).only("id", "name"))
        for node in nodes:
            node.gpu_used = gpu_used.get(node.name, 0)
            node.mig_used = dict(mig_used.get(node.name, {}))
        Node.objects.bulk_update(nodes, ["gpu_used", "mig_used"], batch_size=2000)
        revision_bump(name="nodes")
    return SnapshotResult(
        cluster=cluster.name,
        kind=cluster.kind,
        format="kubernetes-pods",
        nodes=len(nodes),
        added=0,
        gone=0,
        pods=len(pods),
    )


def node_bind(*, node: Node, server: Server | None) -> Node:
    """A person binds a node to a server (or unbinds it: back to automatic binding)."""
    node.server = server
    node.binding_method = BindingMethod.MANUAL if server else BindingMethod.NONE
    node.bound_at = timezone.now() if server else None
    node.save(update_fields=["server", "binding_method", "bound_at"])
    revision_bump(name="nodes")
    return node
