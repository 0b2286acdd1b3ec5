"""Workload listings arriving: pushed to `POST clusters/{name}/snapshots/`, imported with
`import_snapshot`, or pulled by the cluster sync.

The snapshot endpoint is the clusters layer's; this layer routes the listings it owns
(slurmrestd jobs, `squeue --json`, `scontrol show job -d`, accounting) before handing the
rest (node sets, pod lists) to `clusters.services`. A pod list does both: the nodes' GPUs
in use there, the pod groups here. A jobs listing never changes the node set, and is
refused (field-level, nothing written) for a cluster whose nodes were never posted.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from agent.sources.text import TextDecodeError, decode_text
from clusters.choices import ClusterKind
from clusters.models import Cluster
from clusters.parsers.kubernetes import parse_pods
from clusters.parsers.records import SnapshotFormatError
from clusters.services import SnapshotRejected, cluster_name_valid
from core.safe_input import InputRejected, json_loads
from workloads.parsers.detect import (
    looks_like_jobs_document,
    looks_like_jobs_text,
    parse_jobs_document,
    parse_jobs_text,
)
from workloads.records import JobsSnapshot, WorkloadFormatError
from workloads.services.apply import ApplyResult, workloads_apply

logger = logging.getLogger(__name__)

# A JSON body is parsed here only when its first bytes name a jobs list: node listings,
# however large, go to the clusters layer untouched (it may store them for a worker).
_JOBS_KEY = re.compile(rb'"jobs"\s*:')
_SNIFF_BYTES = 1 << 16


def _rejected(exc: WorkloadFormatError | InputRejected | SnapshotFormatError) -> SnapshotRejected:
    if isinstance(exc, InputRejected):
        return SnapshotRejected.from_input(exc)
    if isinstance(exc, WorkloadFormatError):
        return SnapshotRejected(exc.reason, exc.path)
    return SnapshotRejected(str(exc))


def jobs_detect(raw: bytes) -> JobsSnapshot | None:
    """The workload listing a posted body holds, parsed; None when it holds none (a node
    set or pod list: the clusters layer's). Raises SnapshotRejected for a listing of a
    known jobs format that is broken."""
    head = raw[:_SNIFF_BYTES].lstrip()
    if head[:1] in (b"{", b"["):
        if not _JOBS_KEY.search(head):
            return None
        try:
            document = json_loads(decode_text(raw))
        except (InputRejected, TextDecodeError):
            return None  # the clusters layer names what is wrong with it
        if not isinstance(document, dict) or not looks_like_jobs_document(document):
            return None
        return jobs_parse(document)
    try:
        text = decode_text(raw)
    except TextDecodeError:
        return None
    if not looks_like_jobs_text(text):
        return None
    return jobs_parse(text)


def jobs_parse(source: dict[str, Any] | str) -> JobsSnapshot:
    """Parse a jobs document or text; every failure a SnapshotRejected naming the field.

    A listing of exactly one job is taken as that job alone (slurmrestd's `/job/{id}` and
    `scontrol show job -d <id>` look like a listing of one): it ends no other workload. A
    cluster whose whole listing is one job has its ended jobs ended by the next listing of
    none or several.
    """
    try:
        if isinstance(source, str):
            snapshot = parse_jobs_text(source)
        else:
            snapshot = parse_jobs_document(source)
    except (WorkloadFormatError, SnapshotFormatError) as exc:
        raise _rejected(exc) from None
    except (ArithmeticError, RecursionError, KeyError, TypeError, ValueError) as exc:
        raise SnapshotRejected(f"the input is malformed ({type(exc).__name__})") from None
    if snapshot.complete and len(snapshot.workloads) == 1:
        return dataclasses.replace(snapshot, complete=False)
    return snapshot


def jobs_ingest(
    *, cluster_name: str, snapshot: JobsSnapshot, now: datetime | None = None
) -> ApplyResult:
    """Apply a parsed listing to a known cluster of its scheduler's kind; SnapshotRejected
    (nothing written) for an unknown or other-kind cluster or GPUs its nodes lack."""
    if not cluster_name_valid(cluster_name):
        raise SnapshotRejected(
            "a cluster name is lower-case letters, digits, '-' and '_' (at most 100)", "name"
        )
    kind = ClusterKind.SLURM if snapshot.scheduler == "slurm" else ClusterKind.KUBERNETES
    cluster = Cluster.objects.filter(name=cluster_name).first()
    if cluster is None or cluster.kind != kind:
        raise SnapshotRejected(
            f"post the node list of {kind.label} cluster {cluster_name!r} before its "
            "workloads (a jobs listing never changes the node set)"
        )
    try:
        result = workloads_apply(cluster=cluster, snapshot=snapshot, now=now or timezone.now())
    except WorkloadFormatError as exc:
        raise _rejected(exc) from None
    _follow_ups_on_commit()
    return result


def pods_ingest(*, cluster_name: str, document: dict[str, Any]) -> ApplyResult | None:
    """The pod groups of a pod list the clusters layer took (its GPUs in use per node),
    with the device IDs the nodes' agents reported joined in. An ID no GPU of the node's
    server has is the agent's report at fault, refused when it arrives; here it joins no GPU.
    """
    from workloads.services.pods import pod_workloads

    try:
        pods = parse_pods(document)
    except SnapshotFormatError as exc:
        raise _rejected(exc) from None
    cluster = Cluster.objects.filter(name=cluster_name).first()
    if cluster is None:
        return None
    snapshot, _unknown = pod_workloads(cluster=cluster, pods=pods)
    return jobs_ingest(cluster_name=cluster_name, snapshot=snapshot)


def _follow_ups_on_commit() -> None:
    """Applied workloads change what the findings and the placement verdicts judge."""
    from workloads.tasks import workloads_changed

    transaction.on_commit(workloads_changed)
