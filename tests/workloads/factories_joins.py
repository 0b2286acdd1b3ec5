"""Workloads and allocations written straight to the database, for the joins' tests (the
parsers and the apply service have tests of their own)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from clusters.models import Cluster
from inventory.models import Gpu, Server
from workloads.models import Allocation, Workload


def server_with_gpus(hostname: str, gpus: int = 8, **fields: Any) -> Server:
    """A server and its GPUs 0..gpus-1 (serials `<hostname>-S<index>`)."""
    server = Server.objects.create(identity=f"hostname:{hostname}", hostname=hostname, **fields)
    Gpu.objects.bulk_create(
        Gpu(
            server=server,
            index=i,
            uuid=f"GPU-{hostname}-{i}",
            serial=f"{hostname}-S{i}",
            name="NVIDIA H100 80GB HBM3",
        )
        for i in range(gpus)
    )
    return server


def workload(
    scheduler_id: str,
    *,
    cluster: str = "hpc",
    kind: str = "slurm_job",
    user: str = "alice",
    account: str = "",
    state: str = "running",
    started_at: datetime | None = None,
) -> Workload:
    found, _ = Cluster.objects.get_or_create(
        name=cluster, defaults={"kind": "kubernetes" if kind == "pods" else "slurm"}
    )
    return Workload.objects.create(
        cluster=found,
        kind=kind,
        scheduler_id=scheduler_id,
        user=user,
        account=account,
        state=state,
        started_at=started_at or timezone.now(),
    )


def hold(
    work: Workload,
    server: Server,
    indices: list[int] | range,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    node_name: str | None = None,
) -> list[Allocation]:
    """`work` holds these GPUs of `server` from `since` (default now) until `until`."""
    gpus = {g.index: g for g in Gpu.objects.filter(server=server, index__in=list(indices))}
    rows = [
        Allocation(
            workload=work,
            node_name=node_name or server.hostname,
            server=server,
            gpu=gpus[i],
            index=i,
            uuid=gpus[i].uuid,
            gpu_serial=gpus[i].serial,
            since=since or timezone.now(),
            until=until,
        )
        for i in indices
    ]
    work.gpu_count = work.gpu_count + len(rows)
    work.save(update_fields=["gpu_count"])
    return Allocation.objects.bulk_create(rows)
