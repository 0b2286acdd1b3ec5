"""What the GPUs say: each server's compute processes (with the workload their cgroup names)
and the kubelet's pod-resources view, from its newest applied report.

Workloads sit above inventory, so report apply never calls in here; this pass reads what
apply stored, as health's sweep does. Its cursor is per server: `ServerWorkloadView.report_id`
is the report the server's facts come from, so a server whose `last_report` is newer is due.
A server's facts are replaced by its newest report only (an older one that was applied in
between is old news), no report is ever waited for, and a pass repeated is a pass done once.

A full report replaces everything: without `processes` keys it says nothing about processes
(`processes_reported` False, rows cleared), with them it lists exactly the processes now; a
GPU whose `processes` is null (NVML could not list them) has no rows. A partial report
replaces only the rows of the GPUs it names, and the pod devices only where it carries
`pod_resources`.

Each process is joined to a workload: a Slurm job by the job id in its cgroup among the
Slurm clusters of the server's bound nodes (`scheduler_id`, or `requested["job_id"]` for an
array task or heterogeneous component, whose cgroup holds the raw job id); a pod by its UID:
the pod group on that server whose pods carry it (`requested["pod_uids"]`, from the pod
list), else through the kubelet's view, which turns the UID into a namespace and pod name
(the container holding the process's GPU, or any GPU of the same pod UID on that server) and
then into the pod group whose allocation names that pod. A batch of servers costs a fixed
number of queries.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from clusters.choices import ClusterKind
from clusters.models import Node
from core.batches import chunks
from inventory.choices import ReportStatus
from inventory.models import Gpu, MigDevice, Report, Server

from ..choices import WorkloadKind, WorkloadState
from ..models import Allocation, GpuProcess, PodDevice, ServerWorkloadView, Workload
from ..rules import strip_replica

logger = logging.getLogger(__name__)

BATCH = 500  # servers per transaction
IN_CHUNK = 1000  # ids per IN (...) list


@dataclass
class _Process:
    gpu_uuid: str
    device_uuid: str
    mig: bool
    pid: int
    name: str
    used_memory_bytes: int | None
    scheduler: str
    job_id: str
    step: str
    pod_uid: str
    container: str


@dataclass
class _PodDevice:
    namespace: str
    pod: str
    container: str
    resource: str
    device_id: str


@dataclass
class _ServerFacts:
    server_id: int
    report_id: int
    partial: bool
    processes_reported: bool
    named_uuids: set[str] = field(default_factory=set)  # GPUs (and MIG devices) it lists
    processes: list[_Process] = field(default_factory=list)
    pod_resources: dict[str, Any] | None = None
    pod_devices: list[_PodDevice] = field(default_factory=list)


def workload_facts_record(*, since_report_id: int | None = None, batch: int = BATCH) -> int:
    """Replace the processes and pod devices of every server whose newest applied report is
    newer than its facts (and, with `since_report_id`, newer than that id). Returns the number
    of servers recorded."""
    done = 0
    while True:
        due = Server.objects.filter(
            last_report__isnull=False, last_report__status=ReportStatus.APPLIED
        ).filter(
            Q(workload_view__isnull=True) | Q(workload_view__report_id__lt=F("last_report_id"))
        )
        if since_report_id is not None:
            due = due.filter(last_report_id__gt=since_report_id)
        pairs = list(due.order_by("id").values_list("id", "last_report_id")[:batch])
        if not pairs:
            return done
        with transaction.atomic():
            _store_or_skip(pairs)
        done += len(pairs)
        if len(pairs) < batch:
            return done


def _store_or_skip(pairs: list[tuple[int, int]]) -> None:
    """Store a batch; where it fails, each server alone (each in its own savepoint).

    A server whose report this code cannot store would otherwise be due again at every pass,
    and stop every server behind it: it is logged, and its view moves to that report with no
    facts (nothing is known of its processes until its next report)."""
    try:
        with transaction.atomic():
            workload_facts_store(reports=pairs)
        return
    except Exception:  # one bad report must not stop the fleet's facts: found below, logged
        if len(pairs) > 1:
            for pair in pairs:
                _store_or_skip([pair])
            return
    server_id, report_id = pairs[0]
    logger.exception("workloads: report %s of server %s not stored", report_id, server_id)
    GpuProcess.objects.filter(server_id=server_id).delete()
    PodDevice.objects.filter(server_id=server_id).delete()
    ServerWorkloadView.objects.update_or_create(
        server_id=server_id,
        defaults={
            "report_id": report_id,
            "seen_at": timezone.now(),
            "processes_reported": False,
            "pod_resources_available": None,
            "pod_resources_error": "",
        },
    )


def workload_facts_store(*, reports: list[tuple[int, int]]) -> int:
    """Store the facts of these (server id, report id) pairs, each report its server's newest
    applied one, in a fixed number of queries. Returns the number of servers stored."""
    facts = _load(reports)
    if not facts:
        return 0
    now = timezone.now()
    gpus, migs = _devices(facts)
    server_ids = [f.server_id for f in facts]
    joined = _join(facts)
    previous = dict(
        ServerWorkloadView.objects.filter(server_id__in=server_ids).values_list(
            "server_id", "processes_reported"
        )
    )

    rows: list[GpuProcess] = []
    for f, workload_ids in zip(facts, joined, strict=True):
        for p, workload_id in zip(f.processes, workload_ids, strict=True):
            gpu = gpus.get(p.gpu_uuid)
            mig = migs.get(p.device_uuid) if p.mig else None
            rows.append(
                GpuProcess(
                    server_id=f.server_id,
                    gpu_id=gpu,
                    mig_device_id=mig,
                    gpu_uuid=p.device_uuid,
                    pid=p.pid,
                    process_name=p.name,
                    used_memory_bytes=p.used_memory_bytes,
                    scheduler=p.scheduler,
                    job_id=p.job_id,
                    step=p.step,
                    pod_uid=p.pod_uid,
                    container=p.container,
                    workload_id=workload_id,
                    report_id=f.report_id,
                    seen_at=now,
                )
            )

    full = [f.server_id for f in facts if not f.partial]
    replaced = Q(server_id__in=full)
    for f in facts:
        if f.partial and f.processes_reported:
            replaced |= Q(server_id=f.server_id, gpu_uuid__in=sorted(f.named_uuids))
    GpuProcess.objects.filter(replaced).delete()
    GpuProcess.objects.bulk_create(rows, batch_size=IN_CHUNK)

    pods_replaced = [f.server_id for f in facts if not f.partial or f.pod_resources is not None]
    PodDevice.objects.filter(server_id__in=pods_replaced).delete()
    PodDevice.objects.bulk_create(
        [
            PodDevice(
                server_id=f.server_id,
                namespace=d.namespace,
                pod=d.pod,
                container=d.container,
                resource=d.resource,
                device_id=d.device_id,
                report_id=f.report_id,
                seen_at=now,
            )
            for f in facts
            for d in f.pod_devices
        ],
        batch_size=IN_CHUNK,
    )
    ServerWorkloadView.objects.bulk_create(
        [_view(f, previous.get(f.server_id), now) for f in facts],
        update_conflicts=True,
        unique_fields=["server"],
        update_fields=[
            "report_id",
            "seen_at",
            "processes_reported",
            "pod_resources_available",
            "pod_resources_error",
        ],
    )
    return len(facts)


def _view(f: _ServerFacts, before: bool | None, now: datetime) -> ServerWorkloadView:
    reported = f.processes_reported or (f.partial and bool(before))
    pr = f.pod_resources
    available = pr.get("available") if pr is not None else None
    return ServerWorkloadView(
        server_id=f.server_id,
        report_id=f.report_id,
        seen_at=now,
        processes_reported=reported,
        pod_resources_available=available if isinstance(available, bool) else None,
        pod_resources_error=str((pr or {}).get("error") or "")[:2000],
    )


# -- reading the reports ---------------------------------------------------------------------


def _load(reports: list[tuple[int, int]]) -> list[_ServerFacts]:
    """The parts of the stored reports this pass reads (the GPUs and the kubelet's view); a
    report that cannot be read gives its server no facts (a view saying so)."""
    server_of = {report_id: server_id for server_id, report_id in reports}
    rows = Report.objects.filter(id__in=list(server_of)).values(
        "id", "payload__gpus", "payload__pod_resources", "payload__partial"
    )
    read = {row["id"]: dict(row) for row in rows}
    empty = {"payload__gpus": None, "payload__pod_resources": None, "payload__partial": None}
    return [
        _parse(server_id, report_id, read.get(report_id, empty))
        for report_id, server_id in sorted(server_of.items())
    ]


def _json(value: Any) -> Any:
    if isinstance(value, str):  # some backends hand back a JSON fragment as text
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _parse(server_id: int, report_id: int, row: dict[str, Any]) -> _ServerFacts:
    gpus = _json(row["payload__gpus"])
    pod_resources = _json(row["payload__pod_resources"])
    partial = _json(row["payload__partial"]) is True
    facts = _ServerFacts(
        server_id=server_id,
        report_id=report_id,
        partial=partial,
        processes_reported=False,
        pod_resources=pod_resources if isinstance(pod_resources, dict) else None,
    )
    for gpu in gpus if isinstance(gpus, list) else []:
        if not isinstance(gpu, dict) or not gpu.get("uuid"):
            continue
        uuid = str(gpu["uuid"])
        facts.named_uuids.add(uuid)
        _processes(facts, gpu, uuid, uuid, mig=False)
        for mig in gpu.get("mig_devices") or []:
            if isinstance(mig, dict) and mig.get("uuid"):
                facts.named_uuids.add(str(mig["uuid"]))
                _processes(facts, mig, uuid, str(mig["uuid"]), mig=True)
    if facts.pod_resources is not None:
        facts.pod_devices = list(_pod_devices(facts.pod_resources))
    return facts


def _processes(facts: _ServerFacts, item: dict[str, Any], gpu: str, device: str, mig: bool):
    if "processes" not in item:
        return
    facts.processes_reported = True
    for p in item.get("processes") or []:
        if not isinstance(p, dict) or not isinstance(p.get("pid"), int):
            continue
        found = p.get("workload")
        ref: dict[str, Any] = found if isinstance(found, dict) else {}
        scheduler = str(ref.get("scheduler") or "")
        memory = p.get("used_memory_bytes")
        facts.processes.append(
            _Process(
                gpu_uuid=gpu,
                device_uuid=device,
                mig=mig,
                pid=p["pid"],
                name=str(p.get("name") or "")[:256],
                used_memory_bytes=memory if isinstance(memory, int) else None,
                scheduler=scheduler if scheduler in ("slurm", "kubernetes") else "",
                job_id=str(ref.get("id") or "")[:64] if scheduler == "slurm" else "",
                step=str(ref.get("step") or "")[:64] if scheduler == "slurm" else "",
                pod_uid=str(ref.get("pod_uid") or "")[:64] if scheduler == "kubernetes" else "",
                container=str(ref.get("container") or "")[:253]
                if scheduler == "kubernetes"
                else "",
            )
        )


def _pod_devices(view: dict[str, Any]) -> Iterable[_PodDevice]:
    for pod in view.get("pods") or []:
        if not isinstance(pod, dict):
            continue
        for container in pod.get("containers") or []:
            if not isinstance(container, dict):
                continue
            for device in container.get("devices") or []:
                if not isinstance(device, dict):
                    continue
                for device_id in device.get("ids") or []:
                    yield _PodDevice(
                        namespace=str(pod.get("namespace") or "")[:253],
                        pod=str(pod.get("name") or "")[:253],
                        container=str(container.get("name") or "")[:253],
                        resource=str(device.get("resource") or "")[:253],
                        device_id=str(device_id)[:128],
                    )


# -- joins -----------------------------------------------------------------------------------


def _chunks(items: list[Any], size: int = IN_CHUNK) -> Iterable[Sequence[Any]]:
    return chunks(items, size)


def _devices(facts: list[_ServerFacts]) -> tuple[dict[str, int], dict[str, int]]:
    """GPU ids by UUID, MIG device ids by UUID, for the devices the processes run on."""
    gpu_uuids = sorted({p.gpu_uuid for f in facts for p in f.processes})
    mig_uuids = sorted({p.device_uuid for f in facts for p in f.processes if p.mig})
    gpus: dict[str, int] = {}
    migs: dict[str, int] = {}
    for chunk in _chunks(gpu_uuids):
        gpus.update(Gpu.objects.filter(uuid__in=chunk).values_list("uuid", "id"))
    for chunk in _chunks(mig_uuids):
        migs.update(MigDevice.objects.filter(uuid__in=chunk).values_list("uuid", "id"))
    return gpus, migs


def _slurm_clusters(server_ids: list[int]) -> dict[int, tuple[int, ...]]:
    """The Slurm clusters of each server's bound nodes."""
    out: dict[int, set[int]] = defaultdict(set)
    rows = Node.objects.filter(server_id__in=server_ids, kind=ClusterKind.SLURM).values_list(
        "server_id", "cluster_id"
    )
    for server_id, cluster_id in rows:
        out[server_id].add(cluster_id)
    return {s: tuple(sorted(c)) for s, c in out.items()}


_RANK: dict[str, int] = {WorkloadState.RUNNING: 0, WorkloadState.PENDING: 1}


def _best(candidates: Iterable[tuple[int, str] | None]) -> tuple[int, str] | None:
    """The workload among candidates (id, state): a running one first, then the newest."""
    found = [c for c in candidates if c is not None]
    return min(found, key=lambda c: (_RANK.get(c[1], 2), -c[0])) if found else None


def _pick(candidates: Iterable[tuple[int, str] | None]) -> int | None:
    best = _best(candidates)
    return best[0] if best else None


def _slurm_workloads(
    facts: list[_ServerFacts], clusters: dict[int, tuple[int, ...]]
) -> dict[tuple[int, str], tuple[int, str]]:
    """(cluster, job id in the cgroup) -> (workload id, state), one query per chunk."""
    job_ids = sorted(
        {p.job_id for f in facts if f.server_id in clusters for p in f.processes if p.job_id}
    )
    cluster_ids = sorted({c for cs in clusters.values() for c in cs})
    candidates: dict[tuple[int, str], list[tuple[int, str]]] = defaultdict(list)
    if not job_ids or not cluster_ids:
        return {}
    for chunk in _chunks(job_ids):
        numbers = [int(j) for j in chunk if j.isdigit()]
        rows = Workload.objects.filter(
            Q(scheduler_id__in=chunk)
            | Q(requested__job_id__in=chunk)
            | Q(requested__job_id__in=numbers),
            cluster_id__in=cluster_ids,
            kind=WorkloadKind.SLURM_JOB,
        ).values_list("id", "cluster_id", "scheduler_id", "state", "requested__job_id")
        for wid, cluster_id, scheduler_id, state, raw in rows:
            for job in {scheduler_id, "" if raw is None else str(raw)} - {""}:
                candidates[(cluster_id, job)].append((wid, state))
    return {key: best for key, c in candidates.items() if (best := _best(c)) is not None}


def _join(facts: list[_ServerFacts]) -> list[list[int | None]]:
    """Per server, per process (in order): the workload its cgroup names, or None."""
    server_ids = [f.server_id for f in facts]
    clusters = _slurm_clusters(server_ids)
    slurm = _slurm_workloads(facts, clusters)
    pods = _pod_workloads(facts, server_ids)
    uids = _uid_workloads(facts, server_ids)
    out: list[list[int | None]] = []
    for f in facts:
        pod_of_uid = _pods_by_uid(f)
        ids: list[int | None] = []
        for p in f.processes:
            workload_id = None
            if p.scheduler == "slurm" and p.job_id:
                workload_id = _pick(slurm.get((c, p.job_id)) for c in clusters.get(f.server_id, ()))
            elif p.scheduler == "kubernetes" and p.pod_uid:
                workload_id = uids.get((f.server_id, p.pod_uid))
                ns_pod = pod_of_uid.get(p.pod_uid)
                if workload_id is None and ns_pod is not None:
                    workload_id = pods.get((f.server_id, *ns_pod))
            ids.append(workload_id)
        out.append(ids)
    return out


def workload_processes_rejoin() -> int:
    """Join the stored processes that name a scheduler but no workload yet: a job's process
    reported before the jobs listing that names the job was applied. Called by the findings
    pass, so a jobs snapshot applied after the report joins them without waiting for the
    next report. A fixed number of queries; returns the number joined."""
    rows = list(
        GpuProcess.objects.filter(workload__isnull=True)
        .exclude(scheduler="")
        .order_by("server_id", "id")
        .values("id", "server_id", "gpu_uuid", "scheduler", "job_id", "pod_uid", "container")
    )
    if not rows:
        return 0
    by_server: dict[int, _ServerFacts] = {}
    ids: dict[int, list[int]] = defaultdict(list)
    for r in rows:
        f = by_server.get(r["server_id"])
        if f is None:
            f = by_server[r["server_id"]] = _ServerFacts(
                server_id=r["server_id"], report_id=0, partial=False, processes_reported=True
            )
        f.processes.append(
            _Process(
                gpu_uuid=r["gpu_uuid"],
                device_uuid=r["gpu_uuid"],
                mig=False,
                pid=0,
                name="",
                used_memory_bytes=None,
                scheduler=r["scheduler"],
                job_id=r["job_id"],
                step="",
                pod_uid=r["pod_uid"],
                container=r["container"],
            )
        )
        ids[r["server_id"]].append(r["id"])
    if any(r["scheduler"] == "kubernetes" for r in rows):
        devices = PodDevice.objects.filter(server_id__in=list(by_server)).values_list(
            "server_id", "namespace", "pod", "container", "resource", "device_id"
        )
        for server_id, namespace, pod, container, resource, device_id in devices:
            by_server[server_id].pod_devices.append(
                _PodDevice(namespace, pod, container, resource, device_id)
            )
    facts = list(by_server.values())
    found = [
        GpuProcess(id=row_id, workload_id=wid)
        for f, joined in zip(facts, _join(facts), strict=True)
        for row_id, wid in zip(ids[f.server_id], joined, strict=True)
        if wid is not None
    ]
    GpuProcess.objects.bulk_update(found, ["workload"], batch_size=IN_CHUNK)
    return len(found)


UID_HISTORY = timedelta(days=1)
"""A pod group that gave its GPUs back this recently still names its pods' UIDs: a process it
left behind is a stray of that group, not of nobody."""


def _uid_workloads(facts: list[_ServerFacts], server_ids: list[int]) -> dict[tuple[int, str], int]:
    """(server, pod UID) -> the pod group holding GPUs of that server whose pods carry that
    UID (`requested["pod_uids"]`, from the pod list), a live group first; one query."""
    if not any(p.pod_uid for f in facts for p in f.processes):
        return {}
    rows = (
        Allocation.objects.filter(
            Q(server_id__in=server_ids) | Q(node__server_id__in=server_ids),
            Q(until__isnull=True) | Q(until__gte=timezone.now() - UID_HISTORY),
            workload__kind=WorkloadKind.PODS,
        )
        .values_list(
            "workload_id",
            "server_id",
            "node__server_id",
            "workload__state",
            "workload__requested__pod_uids",
        )
        .distinct()
    )
    candidates: dict[tuple[int, str], list[tuple[int, str]]] = defaultdict(list)
    for wid, server_id, node_server_id, state, found in rows:
        found = _json(found)
        for uid in found if isinstance(found, list) else []:
            for sid in {server_id, node_server_id} - {None}:
                candidates[(sid, str(uid))].append((wid, state))
    return {key: w for key, c in candidates.items() if (w := _pick(c)) is not None}


def _pods_by_uid(f: _ServerFacts) -> dict[str, tuple[str, str]]:
    """Pod UID -> (namespace, pod) on one server: a process's UID (its cgroup) is the pod
    whose container the kubelet says holds the process's device; its other processes, on
    GPUs the pod was not given, share the UID."""
    holders: dict[str, list[_PodDevice]] = defaultdict(list)
    for d in f.pod_devices:
        holders[strip_replica(d.device_id)].append(d)
    votes: dict[str, dict[tuple[str, str], int]] = defaultdict(lambda: defaultdict(int))
    for p in f.processes:
        if not p.pod_uid:
            continue
        for d in holders.get(p.device_uuid, []):
            weight = 2 if d.container == p.container else 1
            votes[p.pod_uid][(d.namespace, d.pod)] += weight
    return {uid: max(v.items(), key=lambda kv: (kv[1], kv[0]))[0] for uid, v in votes.items()}


def _pod_workloads(
    facts: list[_ServerFacts], server_ids: list[int]
) -> dict[tuple[int, str, str], int]:
    """(server, namespace, pod) -> pod-group workload id, from the allocations naming that pod
    on that server (or its bound node), a live workload first."""
    pods = sorted({d.pod for f in facts for d in f.pod_devices})
    if not pods:
        return {}
    candidates: dict[tuple[int, str, str], list[tuple[int, str]]] = defaultdict(list)
    for chunk in _chunks(pods):
        rows = Allocation.objects.filter(
            Q(server_id__in=server_ids) | Q(node__server_id__in=server_ids),
            pod__in=chunk,
            workload__kind=WorkloadKind.PODS,
        ).values_list(
            "workload_id",
            "server_id",
            "node__server_id",
            "pod",
            "workload__account",
            "workload__state",
        )
        for wid, server_id, node_server_id, pod, namespace, state in rows:
            for sid in {server_id, node_server_id} - {None}:
                candidates[(sid, namespace, pod)].append((wid, state))
    return {key: w for key, c in candidates.items() if (w := _pick(c)) is not None}
