"""A small Slurm fleet for workload tests: servers reported by agents, nodes bound to them."""

from __future__ import annotations

from datetime import UTC, datetime

from clusters.models import Cluster, Node
from clusters.services import snapshot_ingest
from tests.nodes import scontrol_node, scontrol_text
from tests.reports import apply_reports, make_report
from workloads.records import GpuSlot, JobsSnapshot, NodeAllocation, WorkloadRecord

STARTED = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def slurm_fleet(names: tuple[str, ...] = ("gpu-01", "gpu-02"), *, gpus: int = 8) -> Cluster:
    """Servers `names` (8 H100 each) and a Slurm cluster `hpc` of nodes of the same names,
    bound by hostname (the reconcile that follows the snapshot binds them)."""
    apply_reports(*(make_report(name, gpus=gpus) for name in names))
    nodes = [scontrol_node(name, gres=f"gpu:h100:{gpus}") for name in names]
    snapshot_ingest(cluster_name="hpc", raw=scontrol_text(*nodes))
    cluster = Cluster.objects.get(name="hpc")
    from clusters.reconcile import reconcile_all

    reconcile_all(force=True)
    assert Node.objects.filter(cluster=cluster, server__isnull=False).count() == len(names)
    return cluster


def job(
    scheduler_id: str,
    *nodes: tuple[str, tuple[int, ...]],
    state: str = "running",
    user: str = "alice",
    **fields,
) -> WorkloadRecord:
    """A Slurm job holding, on each (node, indices), those GPU indices."""
    allocations = tuple(
        NodeAllocation(
            node=name,
            gpu_count=len(indices),
            gpus=tuple(GpuSlot(index=i, gpu_type="h100") for i in indices),
        )
        for name, indices in nodes
    )
    return WorkloadRecord(
        kind="slurm_job",
        scheduler_id=scheduler_id,
        state=state,
        user=user,
        account="ml",
        partition="gpu",
        started_at=STARTED if state != "pending" else None,
        node_count=len(nodes),
        allocations=allocations,
        **fields,
    )


def listing(*records: WorkloadRecord, complete: bool = True, history: bool = False) -> JobsSnapshot:
    return JobsSnapshot(
        format="test", scheduler="slurm", workloads=records, complete=complete, history=history
    )
