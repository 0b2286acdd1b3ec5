"""A small factory of workloads for the tests of readers: a running workload holding given GPU
indices of given scheduler nodes, its allocations joined to the nodes' servers and GPUs as the
apply service joins them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from clusters.models import Node
from inventory.models import Gpu
from workloads.models import Allocation, Workload

EPOCH = timezone.make_aware(dt.datetime(2026, 12, 1, 8, 0))


def at(minutes: int) -> dt.datetime:
    """A moment `minutes` after the tests' epoch."""
    return EPOCH + dt.timedelta(minutes=minutes)


def workload(
    scheduler_id: str,
    held: dict[str, list[int]],
    *,
    cluster: str = "hpc",
    user: str = "alice",
    started: int = 0,
    ended: int | None = None,
    **fields: Any,
) -> Workload:
    """A Slurm job holding `held` (node name -> GPU indices) since minute `started` (until
    minute `ended`: then it is completed)."""
    nodes = {n.name: n for n in Node.objects.filter(cluster__name=cluster, name__in=held)}
    any_node = next(iter(nodes.values()))
    per_node = {len(v) for v in held.values()}
    job = Workload.objects.create(
        cluster_id=any_node.cluster_id,
        kind="slurm_job",
        scheduler_id=scheduler_id,
        user=user,
        state="running" if ended is None else "completed",
        started_at=at(started),
        ended_at=None if ended is None else at(ended),
        node_count=len(held),
        gpu_count=sum(len(v) for v in held.values()),
        gpus_per_node=per_node.pop() if len(per_node) == 1 else None,
        **fields,
    )
    gpus = {
        (g.server_id, g.index): g
        for g in Gpu.objects.filter(server_id__in=[n.server_id for n in nodes.values()])
    }
    rows = []
    for name, indexes in held.items():
        node = nodes.get(name)
        for index in indexes:
            gpu = gpus.get((node.server_id, index)) if node else None
            rows.append(
                Allocation(
                    workload=job,
                    node_name=name,
                    node=node,
                    server_id=node.server_id if node else None,
                    gpu=gpu,
                    index=index,
                    gpu_type=gpu.name if gpu else "",
                    since=at(started),
                    until=None if ended is None else at(ended),
                )
            )
    Allocation.objects.bulk_create(rows)
    return job
