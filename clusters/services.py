"""Writes of the scheduler layer: snapshots in, node sets replaced, bindings set by people."""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.db import DataError, IntegrityError, transaction
from django.db.models import F, OuterRef, Q, Subquery
from django.utils import timezone
from django.utils.text import slugify

from core.db.statistics import analyze_after_commit
from core.safe_input import InputRejected, check_strings, decode_text, json_loads
from core.tasks import send_or_log
from inventory.models import Server
from inventory.services import revision_bump

from .choices import BindingMethod, ClusterKind, ClusterSource, SnapshotStatus
from .kubeconfig import kubeconfig_for_pull
from .models import Cluster, ClusterSnapshot, Node
from .parsers import (
    NodeRecord,
    PodRecord,
    Snapshot,
    SnapshotFormatError,
    parse_document,
    parse_pods,
    parse_snapshot,
)
from .validation import node_record_errors, pod_record_errors

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
    "cpus_effective",
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
POD_FORMAT = "kubernetes-pods"
KEPT_LABEL_PREFIXES = (
    "nvidia.com/",
    "kubernetes.io/",
    "node.kubernetes.io/",
    "topology.kubernetes.io/",
)


class SnapshotRejected(Exception):
    """A snapshot that cannot be taken; the cluster's node set stays as it was.

    `errors` maps the path of each field at fault to its messages (`nodes.3.cpus`).
    """

    def __init__(
        self, message: str = "", field: str = "body", errors: dict[str, list[str]] | None = None
    ) -> None:
        errors = errors or {field: [message]}
        field = next(iter(errors))
        super().__init__(message or errors[field][0])
        self.field = field
        self.errors = errors

    @classmethod
    def from_input(cls, exc: InputRejected) -> SnapshotRejected:
        return cls(errors=exc.errors)


@dataclass(frozen=True)
class SnapshotResult:
    """What a snapshot did (applied), would do (held), or that it waits for a worker (pending)."""

    cluster: str
    kind: str
    format: str
    nodes: int | None
    added: int | None
    gone: int | None
    pods: int | None = None
    id: int | None = None
    status: str = SnapshotStatus.APPLIED
    message: str = ""


_Parsed = Snapshot | list[PodRecord]
"""A parsed and validated snapshot: a node set, or a pod list."""


def cluster_name_valid(name: str) -> bool:
    return bool(name) and slugify(name) == name and len(name) <= 100


def snapshot_ingest(
    *, cluster_name: str, raw: bytes | str, confirm_shrink: bool = False
) -> SnapshotResult:
    """Take a raw scheduler snapshot (the tool's own output) for a cluster, now.

    Node snapshots replace the node set (absent nodes are marked gone, not deleted); a
    `kubectl get pods -A -o json` snapshot sets the GPUs in use per Kubernetes node. A name
    not yet known creates the cluster, its kind taken from the format. A node snapshot that
    would mark half or more of the live nodes gone, or too many, is held (see `_apply`).
    An applied snapshot requests a reconcile once it commits (`reconcile_soon`).
    Raises SnapshotRejected, naming the fields at fault, and then stores nothing.
    """
    _check_name(cluster_name)
    raw = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
    return _record_and_apply(
        cluster_name, _parse(raw), source="push", raw=raw, confirm_shrink=confirm_shrink
    )


def snapshot_ingest_document(
    *, cluster_name: str, document: dict[str, Any], confirm_shrink: bool = False
) -> SnapshotResult:
    """The same for JSON a pull already decoded (a NodeList, a PodList, a slurmrestd answer)."""
    _check_name(cluster_name)
    try:
        check_strings(document)
    except InputRejected as exc:
        raise SnapshotRejected.from_input(exc) from None
    return _record_and_apply(
        cluster_name,
        _parse_document(document),
        source="pull",
        raw=b"",
        confirm_shrink=confirm_shrink,
    )


def snapshot_receive(
    *,
    cluster_name: str,
    raw: bytes,
    confirm_shrink: bool = False,
    enqueue: Callable[[int], None] | None = None,
) -> SnapshotResult:
    """A pushed snapshot: applied now when small, stored for a worker when large.

    Above ATLAS_SNAPSHOT_SYNC_MAX_BYTES the body is first checked as the worker would check
    it, short of the database (`snapshot_precheck`: decoded, its format detected, parsed,
    every field and duplicate validated, the cluster's kind), so every refusal is a 400 now;
    then the raw body is stored and `enqueue` is called with its id after commit: the answer
    is `pending`, and the snapshot's status says what became of it (`failed` with the reason
    where the database refuses what the checks passed). When the broker is away it stays
    pending and the sweep applies it. Applied, now or by the worker, it requests a reconcile
    once it commits.
    """
    _check_name(cluster_name)
    if len(raw) <= settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES:
        return snapshot_ingest(cluster_name=cluster_name, raw=raw, confirm_shrink=confirm_shrink)
    snapshot_precheck(cluster_name=cluster_name, raw=raw)
    with transaction.atomic():
        row = ClusterSnapshot.objects.create(
            cluster_name=cluster_name, raw=raw, size_bytes=len(raw), confirm_shrink=confirm_shrink
        )
        if enqueue is not None:
            transaction.on_commit(
                partial(
                    send_or_log,
                    partial(enqueue, row.pk),
                    what=f"snapshot {row.pk}",
                    then="it stays pending for the sweep",
                )
            )
    return _result(row)


def snapshot_precheck(*, cluster_name: str, raw: bytes) -> None:
    """Every check the worker's apply makes that needs no write: the same parse and
    validation (`_parse`, pure, linear in the body) and the cluster's kind (one read).
    Raises SnapshotRejected, naming the fields at fault, as the synchronous path does."""
    parsed = _parse(raw)
    known = Cluster.objects.filter(name=cluster_name).values_list("kind", flat=True).first()
    if isinstance(parsed, list):
        if known != ClusterKind.KUBERNETES:
            raise SnapshotRejected(_pods_without_nodes(cluster_name))
    elif known is not None and known != parsed.kind:
        raise SnapshotRejected(_kind_mismatch(cluster_name, known, parsed.kind))


def snapshot_apply(*, snapshot_id: int) -> str:
    """Apply one stored (pending) snapshot; what the worker runs. Returns the new status.

    Idempotent: a snapshot no longer pending, or being applied by another worker, is
    skipped. A bad snapshot, or one the database refuses (a constraint, a value beyond a
    column: its own error type, never a traceback, is the reason), is marked failed with
    the fields at fault; it is never retried. A database that is away raises, to be retried.
    """
    row = (
        ClusterSnapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.PENDING)
        .only("id", "raw", "cluster_name")
        .first()
    )
    if row is None:
        return "skipped"
    raw = bytes(row.raw)
    try:
        parsed = _parse(raw)
        with transaction.atomic():
            locked = (
                ClusterSnapshot.objects.select_for_update(skip_locked=True)
                .filter(pk=snapshot_id, status=SnapshotStatus.PENDING)
                .defer("raw")
                .first()
            )
            if locked is None:
                return "skipped"
            return _apply(locked, parsed, raw=raw).status
    except SnapshotRejected as exc:
        return _snapshot_failed(row, exc)
    except (IntegrityError, DataError) as exc:
        logger.exception(
            "snapshot %s of cluster %s: the database refused it", row.pk, row.cluster_name
        )
        return _snapshot_failed(
            row,
            SnapshotRejected(
                f"the database refused this snapshot ({type(exc).__name__}); the node set "
                "stays as it was"
            ),
        )


def _snapshot_failed(row: ClusterSnapshot, exc: SnapshotRejected) -> str:
    """Mark a pending snapshot failed, with the reason on it and on its cluster."""
    message = str(exc)[:2000]
    ClusterSnapshot.objects.filter(pk=row.pk, status=SnapshotStatus.PENDING).update(
        status=SnapshotStatus.FAILED,
        message=message,
        errors=exc.errors,
        raw=b"",
        applied_at=timezone.now(),
    )
    Cluster.objects.filter(name=row.cluster_name).update(last_error=message)
    return SnapshotStatus.FAILED


def snapshot_prune() -> int:
    """Keep the newest ATLAS_SNAPSHOT_RETENTION snapshots per cluster (and every waiting one)."""
    keep = settings.ATLAS_SNAPSHOT_RETENTION
    newest = (
        ClusterSnapshot.objects.filter(cluster_name=OuterRef("cluster_name"))
        .order_by("-id")
        .values("id")[keep - 1 : keep]
    )
    deleted, _ = (
        ClusterSnapshot.objects.annotate(cut=Subquery(newest))
        .filter(cut__isnull=False, id__lt=F("cut"))
        .exclude(status__in=(SnapshotStatus.PENDING, SnapshotStatus.HELD))
        .delete()
    )
    return deleted


def _check_name(cluster_name: str) -> None:
    if not cluster_name_valid(cluster_name):
        raise SnapshotRejected(
            "a cluster name is lower-case letters, digits, '-' and '_' (at most 100)", "name"
        )


def _parse(raw: bytes) -> _Parsed:
    """Decode, detect, parse and validate: every failure a SnapshotRejected, nothing stored."""
    try:
        text = decode_text(raw)
    except InputRejected as exc:
        raise SnapshotRejected.from_input(exc) from None
    if text.lstrip()[:1] in ("{", "["):
        try:
            document = json_loads(text)
        except InputRejected as exc:
            raise SnapshotRejected.from_input(exc) from None
        return _parse_document(document)
    return _validated(_parsing(parse_snapshot, text))


def _parse_document(document: Any) -> _Parsed:
    if isinstance(document, dict) and _is_pod_list(document):
        pods = _parsing(parse_pods, document)
        errors = pod_record_errors(pods)
        if errors:
            raise SnapshotRejected(errors=errors)
        return pods
    return _validated(_parsing(parse_document, document))


def _parsing(parse: Callable[[Any], Any], source: Any) -> Any:
    try:
        return parse(source)
    except SnapshotFormatError as exc:
        raise SnapshotRejected(str(exc)) from None
    except (ArithmeticError, RecursionError) as exc:  # a number or nesting no parser expects
        raise SnapshotRejected(f"the input is malformed ({type(exc).__name__})") from None


def _validated(snapshot: Snapshot) -> Snapshot:
    errors = node_record_errors(snapshot.nodes)
    if errors:
        raise SnapshotRejected(errors=errors)
    return snapshot


def _record_and_apply(
    cluster_name: str, parsed: _Parsed, *, source: str, raw: bytes, confirm_shrink: bool
) -> SnapshotResult:
    with transaction.atomic():
        row = ClusterSnapshot.objects.create(
            cluster_name=cluster_name,
            source=source,
            size_bytes=len(raw),
            confirm_shrink=confirm_shrink,
        )
        return _apply(row, parsed, raw=raw)


def _apply(row: ClusterSnapshot, parsed: _Parsed, *, raw: bytes) -> SnapshotResult:
    """Apply a parsed snapshot recorded as `row`, inside the caller's transaction.

    A snapshot older than one already applied to the same cluster is superseded. A node
    snapshot that would mark half or more of the live nodes gone, or more than
    ATLAS_SNAPSHOT_MAX_GONE_NODES (`shrink_held`), is held (stored, not applied) until the
    next snapshot shows the same node set, or one is posted with `confirm_shrink`: one bad
    capture must never empty a cluster.
    """
    if isinstance(parsed, list):
        return _pods_apply(row, parsed)
    snapshot = parsed
    now = timezone.now()
    cluster = _cluster_for(row.cluster_name, snapshot.kind)
    row.kind, row.format, row.nodes = cluster.kind, snapshot.format, len(snapshot.nodes)
    if _newer_applied(row, pods=False):
        return _finish(row, SnapshotStatus.SUPERSEDED, "a newer snapshot was applied first")
    live = set(
        Node.objects.filter(cluster=cluster, gone_at__isnull=True).values_list("name", flat=True)
    )
    names = {r.name for r in snapshot.nodes}
    going = len(live - names)
    held = ClusterSnapshot.objects.filter(
        cluster_name=row.cluster_name, status=SnapshotStatus.HELD, pk__lt=row.pk
    )
    if shrink_held(going=going, live=len(live)) and not row.confirm_shrink:
        digest = _node_set_digest(names)
        previous = held.order_by("-pk").values_list("node_set_hash", flat=True).first()
        if previous != digest:
            held.update(status=SnapshotStatus.SUPERSEDED, raw=b"")
            message = (
                f"held: this snapshot would mark {going} of the {len(live)} live nodes of "
                f"{row.cluster_name} gone. Post the same node set again, or post it with "
                "?confirm=shrink, to apply it."
            )
            Cluster.objects.filter(pk=cluster.pk).update(last_error=message, last_sync_at=now)
            row.node_set_hash, row.raw, row.gone = digest, raw, going
            return _finish(row, SnapshotStatus.HELD, message, applied=False)
    held.update(status=SnapshotStatus.SUPERSEDED, raw=b"")
    added, gone = node_set_replace(cluster=cluster, records=snapshot.nodes, now=now)
    Cluster.objects.filter(pk=cluster.pk).update(
        last_snapshot_format=snapshot.format,
        source_version=(snapshot.source_version or "")[:64],
        last_sync_at=now,
        last_success_at=now,
        last_error="",
    )
    revision_bump(name="nodes")
    _reconcile_on_commit()
    row.added, row.gone = added, gone
    return _finish(row, SnapshotStatus.APPLIED)


def shrink_held(*, going: int, live: int) -> bool:
    """Whether a node snapshot that would mark `going` of `live` nodes gone waits for
    confirmation: half or more of them (1 of 2, the last node of 1: a capture cut in half
    marks the other half gone), or more than ATLAS_SNAPSHOT_MAX_GONE_NODES at once."""
    return going > 0 and (2 * going >= live or going > settings.ATLAS_SNAPSHOT_MAX_GONE_NODES)


def _newer_applied(row: ClusterSnapshot, *, pods: bool) -> bool:
    """Whether a newer snapshot of the same kind (node set, or pods) was applied already."""
    newer = ClusterSnapshot.objects.filter(
        cluster_name=row.cluster_name, pk__gt=row.pk, status=SnapshotStatus.APPLIED
    )
    same = Q(format=POD_FORMAT)
    return newer.filter(same if pods else ~same).exists()


def _node_set_digest(names: set[str]) -> str:
    return hashlib.sha256("\n".join(sorted(names)).encode("utf-8")).hexdigest()


def _finish(
    row: ClusterSnapshot, status: str, message: str = "", *, applied: bool = True
) -> SnapshotResult:
    row.status, row.message = status, message
    row.applied_at = timezone.now() if applied else None
    if status != SnapshotStatus.HELD:
        row.raw = b""
    row.save()
    return _result(row)


def _result(row: ClusterSnapshot) -> SnapshotResult:
    return SnapshotResult(
        cluster=row.cluster_name,
        kind=row.kind,
        format=row.format,
        nodes=row.nodes,
        added=row.added,
        gone=row.gone,
        pods=row.pods,
        id=row.pk,
        status=row.status,
        message=row.message,
    )


def _cluster_for(name: str, kind: str) -> Cluster:
    cluster, _ = Cluster.objects.select_for_update().get_or_create(
        name=name, defaults={"kind": kind}
    )
    if cluster.kind != kind:
        raise SnapshotRejected(_kind_mismatch(name, cluster.kind, kind))
    return cluster


def _pods_without_nodes(name: str) -> str:
    return f"post the node list of Kubernetes cluster {name!r} before its pods"


def _kind_mismatch(name: str, known: str, kind: str) -> str:
    return f"cluster {name!r} is a {ClusterKind(known).label} cluster; this is a {kind} snapshot"


def _node_row(cluster: Cluster, record: NodeRecord, now) -> Node:
    labels = {k: v for k, v in record.labels.items() if k.startswith(KEPT_LABEL_PREFIXES)}
    versions = {
        k: str(getattr(record, k))[:200] for k in VERSION_FIELDS if getattr(record, k, None)
    }
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
        reason=(record.reason or "")[:2000],
        taints=list(record.taints),
        partitions=list(record.partitions),
        cpus=record.cpus,
        cpus_effective=record.cpus_effective,
        memory_bytes=record.memory_bytes,
        gpu_capacity=record.gpu_capacity,
        gpu_allocatable=record.gpu_allocatable,
        gpu_used=record.gpu_used,
        gres=list(record.gres),
        resources=dict(record.resources),
        mig_resources=dict(record.mig_resources),
        mig_used=dict(record.mig_used or {}),
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
    gpu_used and mig_used come from pods, not from the node list, so a node list keeps what
    the last pod snapshot said; a ``kubectl describe`` whose every node has "Allocated
    resources" says what pods request, and replaces them.
    """
    names = [r.name for r in records]
    known = set(Node.objects.filter(cluster=cluster).values_list("name", flat=True))
    rows = [_node_row(cluster, r, now) for r in records]
    fields = NODE_FIELDS
    if cluster.kind == ClusterKind.KUBERNETES:
        if records and all(r.gpu_used is not None and r.mig_used is not None for r in records):
            fields = [*NODE_FIELDS, "mig_used"]
        else:
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
    added = len(set(names) - known)
    # A first load (or a big change) of the node set: the planner gets its statistics now.
    analyze_after_commit(Node, changed=added + gone, total=len(known))
    return added, gone


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


def _pods_apply(row: ClusterSnapshot, pods: list[PodRecord]) -> SnapshotResult:
    """Set the GPUs in use of a Kubernetes cluster's live nodes from a validated pod list."""
    gpu_used: Counter[str] = Counter()
    mig_used: dict[str, Counter[str]] = {}
    for pod in pods:
        if not pod.holds_resources or not pod.node_name:
            continue
        gpu_used[pod.node_name] += pod.gpu_requests
        for profile, count in pod.mig_requests.items():
            mig_used.setdefault(pod.node_name, Counter())[profile] += count
    cluster = Cluster.objects.filter(name=row.cluster_name).first()
    if cluster is None or cluster.kind != ClusterKind.KUBERNETES:
        raise SnapshotRejected(_pods_without_nodes(row.cluster_name))
    row.kind, row.format, row.pods = cluster.kind, POD_FORMAT, len(pods)
    if _newer_applied(row, pods=True):
        return _finish(row, SnapshotStatus.SUPERSEDED, "a newer pod list was applied first")
    nodes = list(Node.objects.filter(cluster=cluster, gone_at__isnull=True).only("id", "name"))
    for node in nodes:
        node.gpu_used = gpu_used.get(node.name, 0)
        node.mig_used = dict(mig_used.get(node.name, {}))
    Node.objects.bulk_update(nodes, ["gpu_used", "mig_used"], batch_size=2000)
    revision_bump(name="nodes")
    _reconcile_on_commit()
    row.nodes, row.added, row.gone = len(nodes), 0, 0
    return _finish(row, SnapshotStatus.APPLIED)


def node_bind(*, node: Node, server: Server | None) -> Node:
    """A person binds a node to a server (or unbinds it: back to automatic binding); the
    reconcile that follows (on commit) re-judges the node and both servers."""
    node.server = server
    node.binding_method = BindingMethod.MANUAL if server else BindingMethod.NONE
    node.bound_at = timezone.now() if server else None
    node.save(update_fields=["server", "binding_method", "bound_at"])
    revision_bump(name="nodes")
    _reconcile_on_commit()
    return node


def _reconcile_on_commit() -> None:
    """A node set, its GPUs in use or a binding changed: once that commits, one reconcile is
    requested (`reconcile_soon`: at most one waits in the queue, however many ask)."""
    from .tasks import reconcile_soon  # the tasks are adapters over this module

    transaction.on_commit(reconcile_soon)


def cluster_sync(*, cluster_id: int) -> str:
    """Pull one cluster's nodes (and, for Kubernetes, pods) and ingest them as snapshots.

    Returns "skipped" (no such cluster, or a pushed one), "held" (a snapshot would drop too
    many nodes), "failed" (recorded on the cluster, the last node set kept) or "ok".
    """
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None or not cluster.pulls:
        return "skipped"
    try:
        for document in pull_documents(cluster):
            result = snapshot_ingest_document(cluster_name=cluster.name, document=document)
            if result.status == SnapshotStatus.HELD:
                logger.warning("sync of cluster %s held: %s", cluster.name, result.message)
                return "held"
    except Exception as exc:  # every failure is recorded on the cluster, the node set kept
        cluster_sync_failed(cluster=cluster, error=exc)
        return "failed"
    return "ok"


def cluster_sync_failed(*, cluster: Cluster, error: BaseException) -> str:
    """Record a failed pull on the cluster (its message, at most 2,000 characters, or the
    error's type) and log it; the cluster keeps its last node set. Returns the message."""
    message = str(error)[:2000] or type(error).__name__
    Cluster.objects.filter(pk=cluster.pk).update(last_sync_at=timezone.now(), last_error=message)
    logger.warning("sync of cluster %s failed: %s", cluster.name, message)
    return message


def pull_documents(cluster: Cluster) -> list[dict]:
    """The raw documents a pull yields: nodes first, then pods (Kubernetes)."""
    if cluster.source in (ClusterSource.KUBECONFIG, ClusterSource.IN_CLUSTER):
        from .pull.kubernetes import list_nodes_and_pods

        return list_nodes_and_pods(
            kubeconfig_path=kubeconfig_for_pull(cluster.kubeconfig_path),
            context=cluster.kube_context or None,
            in_cluster=cluster.source == ClusterSource.IN_CLUSTER,
        )
    from .pull.slurmrestd import fetch_nodes

    return [
        fetch_nodes(
            cluster.slurmrestd_url,
            cluster.slurmrestd_token,
            user=cluster.slurmrestd_user or None,
            version=cluster.slurmrestd_api_version or "auto",
        )
    ]
