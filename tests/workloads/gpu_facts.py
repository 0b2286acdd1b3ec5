"""Servers, workloads and reports that carry what the GPUs say (processes, the kubelet's
devices), written straight to the database for the facts and findings tests: the report
schema's `processes` and `pod_resources` are another change's, so these tests do not go
through ingest."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.utils import timezone

from clusters.models import Cluster, Node
from inventory.choices import ReportStatus
from inventory.models import Gpu, Report, Server
from tests.reports import apply_reports, make_report
from workloads.models import Allocation, Workload


def servers(*hostnames: str, **report: Any) -> dict[str, Server]:
    """Servers applied from ordinary reports (8 GPUs each by default)."""
    return apply_reports(*(make_report(h, **report) for h in hostnames))


def slurm_job(
    job_id: str,
    on: dict[Server, list[int]],
    *,
    cluster: str = "hpc",
    user: str = "alice",
    state: str = "running",
    requested: dict[str, Any] | None = None,
    ended_at=None,
) -> Workload:
    """A Slurm job holding these GPU indexes on these servers (each bound to a node of the
    cluster named after it)."""
    found, _ = Cluster.objects.get_or_create(name=cluster, defaults={"kind": "slurm"})
    job = Workload.objects.create(
        cluster=found,
        kind="slurm_job",
        scheduler_id=job_id,
        user=user,
        account="research",
        state=state,
        requested=requested or {},
        started_at=timezone.now(),
        ended_at=ended_at,
        gpu_count=sum(len(v) for v in on.values()),
        node_count=len(on),
    )
    for server, indexes in on.items():
        node = bind(server, cluster)
        gpus = {g.index: g for g in Gpu.objects.filter(server=server)}
        Allocation.objects.bulk_create(
            Allocation(
                workload=job,
                node_name=node.name,
                node=node,
                server=server,
                gpu=gpus.get(i),
                index=i,
                uuid=gpus[i].uuid if i in gpus else "",
                gpu_serial=gpus[i].serial if i in gpus else "",
            )
            for i in indexes
        )
    return job


def bind(server: Server, cluster: str = "hpc", kind: str = "slurm") -> Node:
    found, _ = Cluster.objects.get_or_create(name=cluster, defaults={"kind": kind})
    node, _ = Node.objects.get_or_create(
        cluster=found, name=server.hostname, defaults={"kind": kind, "server": server}
    )
    return node


def pod_group(
    scheduler_id: str,
    on: Server,
    pods: dict[str, list[int]],
    *,
    cluster: str = "k8s",
    uids: list[str] | None = None,
) -> Workload:
    """A pod group whose pods hold these GPU indexes of one server."""
    namespace = scheduler_id.split("/", 1)[0]
    found, _ = Cluster.objects.get_or_create(name=cluster, defaults={"kind": "kubernetes"})
    node = bind(on, cluster, "kubernetes")
    group = Workload.objects.create(
        cluster=found,
        kind="pods",
        scheduler_id=scheduler_id,
        user="bob",
        account=namespace,
        state="running",
        requested={"pod_uids": uids} if uids else {},
    )
    gpus = {g.index: g for g in Gpu.objects.filter(server=on)}
    Allocation.objects.bulk_create(
        Allocation(
            workload=group,
            node_name=node.name,
            node=node,
            server=on,
            gpu=gpus[i],
            index=i,
            uuid=gpus[i].uuid,
            pod=pod,
        )
        for pod, indexes in pods.items()
        for i in indexes
    )
    return group


def proc(pid: int, memory_mib: int = 1024, workload: dict | None = None, name: str = "python"):
    return {
        "pid": pid,
        "name": name,
        "used_memory_bytes": memory_mib * 2**20,
        "workload": workload,
    }


def slurm(job: str, step: str = "0") -> dict[str, str]:
    return {"scheduler": "slurm", "id": job, "step": step}


def pod(uid: str, container: str = "main") -> dict[str, str]:
    return {"scheduler": "kubernetes", "pod_uid": uid, "container": container}


def report(
    server: Server,
    processes: dict[int, list[dict]] | None = None,
    *,
    mig: dict[int, list[str]] | None = None,
    mig_processes: dict[tuple[int, int], list[dict]] | None = None,
    pod_resources: dict[str, Any] | None = None,
    partial: bool = False,
    gpus: int = 8,
) -> Report:
    """A report of `server` applied as its newest, with these processes per GPU index (every
    GPU gets a `processes` list when `processes` is given; None: an old agent's report)."""
    payload = make_report(server.hostname, gpus=gpus, mig_gpus=mig)
    for gpu in payload["gpus"]:
        if processes is not None:
            gpu["processes"] = processes.get(gpu["index"], [])
        for j, device in enumerate(gpu["mig_devices"]):
            if mig_processes is not None:
                device["processes"] = mig_processes.get((gpu["index"], j), [])
    if pod_resources is not None:
        payload["pod_resources"] = pod_resources
    if partial:
        payload["partial"] = True
    body = json.dumps(payload, sort_keys=True)
    row = Report.objects.create(
        identity=server.identity,
        server=server,
        payload=payload,
        content_hash=hashlib.sha256(body.encode()).hexdigest(),
        status=ReportStatus.APPLIED,
        applied_at=timezone.now(),
    )
    Server.objects.filter(pk=server.pk).update(last_report=row, last_seen=timezone.now())
    return row


def pods_view(*pods: tuple[str, str, str, list[str]], available: bool = True) -> dict[str, Any]:
    """pod_resources of (namespace, pod, container, device ids) entries."""
    return {
        "available": available,
        "error": None if available else "no socket",
        "pods": [
            {
                "namespace": ns,
                "name": name,
                "containers": [
                    {"name": container, "devices": [{"resource": "nvidia.com/gpu", "ids": ids}]}
                ],
            }
            for ns, name, container, ids in pods
        ],
    }
