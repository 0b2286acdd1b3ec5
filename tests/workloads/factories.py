"""Workload rows built directly, as the apply service would leave them, for the reading side.

`fleet()` makes servers through the real report path (GPUs, MIG devices, links), Slurm and
Kubernetes nodes bound to them; `workload()` a workload with one allocation per GPU it
names, each joined to its node, server, GPU (and MIG device) as the apply service joins them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from clusters.models import Cluster, Node
from inventory.models import Server
from tests.reports import apply_reports, make_report
from workloads.models import Allocation, Workload


def fleet(
    hostnames: Sequence[str] = ("dgx-01", "dgx-02"),
    *,
    cluster: str = "slurm-a",
    kind: str = "slurm",
    mig_gpus: dict[int, list[str]] | None = None,
) -> tuple[Cluster, dict[str, Node]]:
    """Servers of 8 H100s, each with a node of the same name in one cluster, bound."""
    servers = apply_reports(*(make_report(h, mig_gpus=mig_gpus) for h in hostnames))
    cluster_row, _ = Cluster.objects.get_or_create(name=cluster, defaults={"kind": kind})
    nodes = {
        h: Node.objects.create(
            cluster=cluster_row,
            name=h,
            kind=kind,
            server=servers[h],
            state="allocated",
            gpu_capacity=8,
            gpu_allocatable=8,
        )
        for h in hostnames
    }
    return cluster_row, nodes


def workload(
    cluster: Cluster,
    scheduler_id: str,
    placement: dict[Node | str, Iterable[int]],
    *,
    user: str = "alice",
    account: str = "ml",
    name: str = "train",
    state: str = "running",
    kind: str = "slurm_job",
    verdict: str = "good",
    locality: dict[str, Any] | None = None,
    started_at: datetime | None = None,
    ended_at: datetime | None = None,
    mig: bool = False,
) -> Workload:
    """A workload holding these GPU indices per node (a node name alone: a node not known).

    Ended states close the allocations at `ended_at` (default: now). `mig`: each index names
    the GPU whose first MIG device is held.
    """
    now = timezone.now()
    started_at = started_at or now - timedelta(hours=1)
    ended = state not in ("running", "pending")
    if ended and ended_at is None:
        ended_at = now
    per_node = {k: list(v) for k, v in placement.items()}
    gpu_count = sum(len(v) for v in per_node.values())
    counts = {len(v) for v in per_node.values()}
    row = Workload.objects.create(
        cluster=cluster,
        kind=kind,
        scheduler_id=scheduler_id,
        name=name,
        user=user,
        account=account,
        partition="gpu",
        state=state,
        submitted_at=started_at - timedelta(minutes=5),
        started_at=started_at,
        ended_at=ended_at,
        node_count=len(per_node),
        gpu_count=gpu_count,
        gpus_per_node=counts.pop() if len(counts) == 1 else None,
        gpu_models=["NVIDIA H100 80GB HBM3"] if gpu_count else [],
        verdict=verdict,
        locality=locality
        if locality is not None
        else {
            "within_node": "NV18" if gpu_count > 1 else None,
            "switch_hops": 0 if len(per_node) == 1 else 2,
            "verdict": verdict,
            "why": "all its GPUs on one node are joined by NVLink",
        },
    )
    rows = []
    for node, indexes in per_node.items():
        server: Server | None = node.server if isinstance(node, Node) else None
        gpus = {g.index: g for g in server.gpus.all()} if server else {}
        for index in indexes:
            gpu = gpus.get(index)
            device = gpu.mig_devices.order_by("id").first() if (gpu and mig) else None
            rows.append(
                Allocation(
                    workload=row,
                    node_name=node.name if isinstance(node, Node) else node,
                    node=node if isinstance(node, Node) else None,
                    server=server,
                    gpu=gpu,
                    mig_device=device,
                    index=index,
                    uuid=(device.uuid if device else gpu.uuid) if gpu else "",
                    gpu_type="h100",
                    gpu_serial=gpu.serial if gpu else "",
                    since=started_at,
                    until=ended_at if ended else None,
                )
            )
    Allocation.objects.bulk_create(rows)
    return row
