"""The workloads findings pass: gather the facts (`workloads.rules.WorkloadFacts`), run the
pure rules, write the findings as the workloads family (so no other writer resolves them,
and this pass resolves no other family's).

Run after each batch of reports' facts is stored, after a jobs snapshot is applied
(`workload_findings_refresh`, called by the apply service), and by beat (the GPUs that need
action and the reconciliation findings move without either). Processes stored before the
jobs listing that names them are joined first (`workload_processes_rejoin`). The whole fleet
is judged in a fixed number of queries: the process rows, the GPUs needing action
(`health.selectors`, the one rule), the open critical reconciliation findings, and only
those open allocations that one of these touches.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from clusters.choices import ClusterKind
from clusters.models import Node
from findings.choices import Family, Severity, family_q
from findings.models import Finding
from findings.services import findings_write
from health.selectors import gpus_needing_action

from ..choices import WorkloadState
from ..models import Allocation, GpuProcess, ServerWorkloadView
from ..rules import (
    GpuNeed,
    HeldDevice,
    ProcessFact,
    WorkloadFacts,
    WorkloadRef,
    WrongPlace,
    evaluate,
    strip_replica,
)
from .facts import workload_processes_rejoin

_WORKLOAD_FIELDS = ("cluster_id", "scheduler_id", "user", "account", "state", "kind")


def workload_findings_refresh(*, now: datetime | None = None) -> tuple[int, int, int]:
    """Judge the fleet's workloads findings again and write them: raise, reopen, resolve.
    Processes stored before the listing that names their job are joined first. Returns
    (raised, resolved, open)."""
    now = now or timezone.now()
    with transaction.atomic():
        workload_processes_rejoin()
        desired = evaluate(workload_facts_gather())
        return findings_write(desired=desired, now=now, family=Family.WORKLOADS)


def _ref(wid: int, row: dict[str, Any], prefix: str) -> WorkloadRef:
    return WorkloadRef(
        id=wid,
        cluster_id=row[f"{prefix}cluster_id"],
        scheduler_id=row[f"{prefix}scheduler_id"],
        user=row[f"{prefix}user"] or "",
        account=row[f"{prefix}account"] or "",
        state=row[f"{prefix}state"] or "",
        kind=row[f"{prefix}kind"] or "",
    )


def workload_facts_gather() -> WorkloadFacts:
    """The rules' facts, read in a fixed number of queries however large the fleet."""
    workloads: dict[int, WorkloadRef] = {}
    proc_rows = list(
        GpuProcess.objects.values(
            "server_id",
            "server__hostname",
            "gpu_id",
            "gpu__index",
            "gpu__uuid",
            "gpu_uuid",
            "mig_device_id",
            "pid",
            "process_name",
            "used_memory_bytes",
            "scheduler",
            "job_id",
            "pod_uid",
            "workload_id",
            *(f"workload__{f}" for f in _WORKLOAD_FIELDS),
        )
    )
    unjoined = {
        (r["scheduler"], r["server_id"])
        for r in proc_rows
        if r["scheduler"] and not r["workload_id"]
    }
    # (scheduler, server) where that scheduler's workloads are listed for the server's node:
    # an unjoined process there has no running workload; elsewhere nobody can tell.
    listed: set[tuple[str, int]] = set()
    if unjoined:
        listed = set(
            Node.objects.filter(
                server_id__in={sid for _s, sid in unjoined},
                cluster__workloads__isnull=False,
            )
            .values_list("kind", "server_id")
            .distinct()
        )
    pods_seen: set[int] = set()  # and the kubelet's view answered (pod UIDs resolve)
    if any(s == ClusterKind.KUBERNETES for s, _ in unjoined):
        pods_seen = set(
            ServerWorkloadView.objects.filter(
                server_id__in={sid for s, sid in unjoined if s == ClusterKind.KUBERNETES},
                pod_resources_available=True,
            ).values_list("server_id", flat=True)
        )
    processes = []
    for r in proc_rows:
        if r["workload_id"]:
            workloads[r["workload_id"]] = _ref(r["workload_id"], r, "workload__")
        knowable = not r["scheduler"] or (
            (r["scheduler"], r["server_id"]) in listed
            and (r["scheduler"] != ClusterKind.KUBERNETES or r["server_id"] in pods_seen)
        )
        processes.append(
            ProcessFact(
                server_id=r["server_id"],
                hostname=r["server__hostname"],
                gpu_id=r["gpu_id"],
                gpu_index=r["gpu__index"],
                gpu_uuid=r["gpu__uuid"] or r["gpu_uuid"],
                device_uuid=r["gpu_uuid"],
                mig_device_id=r["mig_device_id"],
                pid=r["pid"],
                name=r["process_name"],
                used_memory_bytes=r["used_memory_bytes"],
                scheduler=r["scheduler"],
                job_id=r["job_id"],
                pod_uid=r["pod_uid"],
                workload_id=r["workload_id"],
                owner_knowable=knowable,
            )
        )

    needing = {
        g.gpu_id: GpuNeed(
            gpu_id=g.gpu_id,
            server_id=g.server_id,
            hostname=g.hostname,
            index=g.index,
            uuid=g.uuid,
            reason=g.reason,
            words=g.words,
        )
        for g in gpus_needing_action()
    }
    wrong_servers, wrong_nodes = _wrong_places()

    touched = (
        Q(workload_id__in=GpuProcess.objects.filter(workload__isnull=False).values("workload_id"))
        | Q(gpu_id__in=GpuProcess.objects.filter(gpu__isnull=False).values("gpu_id"))
        | Q(gpu_id__in=list(needing))
        | Q(server_id__in=list(wrong_servers))
        | Q(node__server_id__in=list(wrong_servers))
        | Q(node_id__in=list(wrong_nodes))
    )
    held = []
    rows = (
        Allocation.objects.filter(
            touched, until__isnull=True, workload__state=WorkloadState.RUNNING
        )
        .order_by("id")
        .values(
            "workload_id",
            "server_id",
            "server__hostname",
            "node_id",
            "node__server_id",
            "node__server__hostname",
            "gpu_id",
            "gpu__index",
            "mig_device_id",
            "uuid",
            "index",
            *(f"workload__{f}" for f in _WORKLOAD_FIELDS),
        )
    )
    for a in rows:
        workloads.setdefault(a["workload_id"], _ref(a["workload_id"], a, "workload__"))
        held.append(
            HeldDevice(
                workload_id=a["workload_id"],
                server_id=a["server_id"] or a["node__server_id"],
                node_id=a["node_id"],
                gpu_id=a["gpu_id"],
                mig_device_id=a["mig_device_id"],
                uuid=strip_replica(a["uuid"] or ""),
                hostname=a["server__hostname"] or a["node__server__hostname"] or "",
                gpu_index=a["gpu__index"] if a["gpu__index"] is not None else a["index"],
            )
        )
    return WorkloadFacts(
        processes=tuple(processes),
        workloads=workloads,
        held=tuple(held),
        needing_action=needing,
        wrong_servers=wrong_servers,
        wrong_nodes=wrong_nodes,
    )


def _wrong_places() -> tuple[dict[int, WrongPlace], dict[int, WrongPlace]]:
    """Servers (by id) and unbound nodes (by id) with open critical reconciliation findings
    about them, one query."""
    rows = (
        Finding.objects.filter(
            family_q(Family.RECONCILIATION),
            Q(server__isnull=False) | Q(node__isnull=False),
            resolved_at__isnull=True,
            severity=Severity.CRITICAL,
        )
        .order_by("id")
        .values(
            "id",
            "message",
            "server_id",
            "server__hostname",
            "node_id",
            "node__name",
            "node__server_id",
            "node__server__hostname",
        )
    )
    servers: dict[int, list[dict[str, Any]]] = {}
    nodes: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        sid = r["server_id"] or r["node__server_id"]
        if sid is not None:
            servers.setdefault(sid, []).append(dict(r))
        elif r["node_id"] is not None:
            nodes.setdefault(r["node_id"], []).append(dict(r))

    def place(sid: int | None, found: list[dict[str, Any]]) -> WrongPlace:
        first = found[0]
        name = first["server__hostname"] or first["node__server__hostname"] or first["node__name"]
        return WrongPlace(
            server_id=sid,
            hostname=name or "",
            finding_ids=tuple(r["id"] for r in found),
            words=tuple(r["message"] for r in found),
        )

    return (
        {sid: place(sid, found) for sid, found in servers.items()},
        {nid: place(None, found) for nid, found in nodes.items()},
    )
