"""Benchmark: reconciling 1,000 / 10,000 / 25,000 servers against Kubernetes and Slurm nodes.

Each size runs in a fresh database: N servers with 8 GPUs each, a Kubernetes cluster whose
N nodes carry the servers' SMBIOS UUIDs, and a Slurm cluster whose N nodes carry their short
hostnames. Printed: the first reconciliation (binds every node), a steady-state one (nothing
changed but the agents' last report; it judges only what changed, `clusters.judged`), one
after a GPU of one server failed, one forced to judge everything (`force=True`, as from
scratch), their query counts and peak Python memory, beside two floors: the least any full
reconciler does (load the identity rows and the GPU counts with `values_list`, then a dict
join that binds and compares counts), and that dict join alone on rows already in Python.
Then one changed server (a GPU starts failing, then recovers): `reconcile_servers` for it
alone, the path a report takes, median of 5 (goal: <= 50 ms at 25,000 servers).

    .venv/bin/python bench/reconcile.py                 # 1k, 10k, 25k on SQLite
    DATABASE_URL=postgres://... .venv/bin/python bench/reconcile.py 1000 25000
"""

from __future__ import annotations

import sys
import time
import tracemalloc
import uuid

from _django import each_size_in_a_fresh_process, setup

SIZES = [int(a) for a in sys.argv[1:] if a.isdigit()] or [1000, 10000, 25000]
GPUS = 8


def build(n: int) -> None:
    from django.utils import timezone

    from clusters.models import Cluster, Node
    from inventory.models import Gpu, Server

    now = timezone.now()
    servers = [
        Server(
            identity=f"uuid:{uuid.UUID(int=i + 1)}",
            system_uuid=str(uuid.UUID(int=i + 1)),
            machine_id=f"{i + 1:032x}",
            hostname=f"gpu{i:05d}",
            fqdn=f"gpu{i:05d}.hpc.example",
            addresses=[f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"],
            driver_version="550.54.15",
            cuda_version="12.4",
            vendor="NVIDIA",
            product="DGXH100",
            last_seen=now,
            pci_gpu_count=GPUS,
        )
        for i in range(n)
    ]
    Server.objects.bulk_create(servers, batch_size=2000)
    ids = list(Server.objects.order_by("id").values_list("id", flat=True))
    Gpu.objects.bulk_create(
        (
            Gpu(
                server_id=sid,
                index=g,
                uuid=f"GPU-{sid:08d}-{g}",
                name="NVIDIA H100 80GB HBM3",
                memory_total_bytes=80 * 2**30,
                mig_mode_current=False,
            )
            for sid in ids
            for g in range(GPUS)
        ),
        batch_size=5000,
    )
    k8s = Cluster.objects.create(name="k8s", kind="kubernetes")
    slurm = Cluster.objects.create(name="slurm", kind="slurm")
    gres = [{"name": "gpu", "type": "h100", "count": GPUS, "used": 0, "mig_profile": None}]
    Node.objects.bulk_create(
        [
            Node(
                cluster=k8s,
                name=f"gpu{i:05d}",
                kind="kubernetes",
                state="ready",
                ready=True,
                schedulable=True,
                system_uuid=str(uuid.UUID(int=i + 1)),
                gpu_capacity=GPUS,
                gpu_allocatable=GPUS,
                gpu_product="NVIDIA-H100-80GB-HBM3",
            )
            for i in range(n)
        ]
        + [
            Node(
                cluster=slurm,
                name=f"gpu{i:05d}",
                kind="slurm",
                state="idle",
                ready=True,
                schedulable=True,
                hostname=f"gpu{i:05d}",
                gpu_capacity=GPUS,
                gpu_allocatable=GPUS,
                gres=gres,
                partitions=["gpu"],
            )
            for i in range(n)
        ],
        batch_size=2000,
    )


def floor(n: int) -> float:
    """The same join with the identities already in Python: the least any reconciler does."""
    servers = [(str(uuid.UUID(int=i + 1)), f"gpu{i:05d}", i) for i in range(n)]
    k8s = [str(uuid.UUID(int=i + 1)) for i in range(n)]
    slurm = [f"gpu{i:05d}" for i in range(n)]
    start = time.perf_counter()
    by_uuid = {u: sid for u, _, sid in servers}
    by_name = {h: sid for _, h, sid in servers}
    bound = [by_uuid.get(u) for u in k8s] + [by_name.get(h) for h in slurm]
    assert all(b is not None for b in bound)
    return time.perf_counter() - start


def agents_report() -> None:
    """Every agent reported just now: a slow build must not make the fleet's agents stale
    (ATLAS_SERVER_STALE_AFTER_S) and turn the steady state into 50,000 new findings."""
    from django.utils import timezone

    from inventory.models import Server

    Server.objects.update(last_seen=timezone.now())


def loading_floor() -> float:
    """Load what binding and the count check need, join in dicts: the full pass's floor."""
    from django.db.models import Count

    from clusters.models import Node
    from inventory.models import Gpu, Server

    start = time.perf_counter()
    servers = list(Server.objects.values_list("id", "system_uuid", "hostname"))
    gpus = dict(Gpu.objects.order_by().values_list("server_id").annotate(n=Count("id")))
    nodes = list(
        Node.objects.filter(gone_at__isnull=True).values_list(
            "id", "kind", "system_uuid", "hostname", "gpu_capacity"
        )
    )
    by_uuid = {u: sid for sid, u, _ in servers}
    by_name = {h: sid for sid, _, h in servers}
    mismatched = 0
    for _, kind, system_uuid, hostname, capacity in nodes:
        sid = by_uuid.get(system_uuid) if kind == "kubernetes" else by_name.get(hostname)
        assert sid is not None
        mismatched += gpus.get(sid, 0) != capacity
    assert mismatched == 0
    return time.perf_counter() - start


def failing_gpu() -> None:
    """A GPU of the second server starts failing: one server's facts change."""
    from inventory.choices import GpuStatus
    from inventory.models import Gpu, Server

    server_id = Server.objects.order_by("id").values_list("id", flat=True)[1]
    Gpu.objects.filter(server_id=server_id, index=0).update(status=GpuStatus.ERROR)


def one_changed_server(repeat: int = 5) -> tuple[float, int, int]:
    """A GPU of one server fails, then recovers: reconcile that server alone each time.
    Returns the median seconds, the queries of one run and the findings it raised."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from clusters.reconcile import reconcile_servers
    from inventory.choices import GpuStatus
    from inventory.models import Gpu, Server

    server_id = Server.objects.order_by("id").values_list("id", flat=True)[0]
    gpu = Gpu.objects.filter(server_id=server_id, index=0)
    times, queries, raised = [], 0, 0
    for i in range(repeat * 2):
        gpu.update(status=GpuStatus.ERROR if i % 2 == 0 else GpuStatus.OK)
        with CaptureQueriesContext(connection) as ctx:
            start = time.perf_counter()
            result = reconcile_servers(server_ids=[server_id])
            times.append(time.perf_counter() - start)
        if i == 0:
            queries, raised = len(ctx.captured_queries), result.findings_raised
    times.sort()
    return times[len(times) // 2], queries, raised


def run_one(n: int) -> None:
    setup()
    from _django import bench_database
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    from clusters.reconcile import reconcile_all

    with bench_database() as (vendor, _):
        started = time.perf_counter()
        build(n)
        built = time.perf_counter() - started
        rows = []
        runs = (
            ("first (binds all)", False, None),
            ("steady state", False, None),
            ("steady, 1 GPU failed", False, failing_gpu),
            ("forced (judges all)", True, None),
        )
        for label, force, change in runs:
            agents_report()
            if change is not None:
                change()
            reset_queries()  # the build filled Django's query log
            with CaptureQueriesContext(connection) as ctx:
                start = time.perf_counter()
                result = reconcile_all(force=force)
                seconds = time.perf_counter() - start
            rows.append((label, seconds, len(ctx.captured_queries), result))
        peaks = []
        for force in (False, True):
            agents_report()
            tracemalloc.start()
            reconcile_all(force=force)
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        floor_s = floor(n)
        loading_s = min(loading_floor() for _ in range(3))
        agents_report()
        one_s, one_queries, one_raised = one_changed_server()
        sizes = f"{n:,} servers, {n * GPUS:,} GPUs, {2 * n:,} nodes"
        print(f"\n{vendor}: {sizes} (built in {built:.1f} s)")
        print(
            f"  {'run':<22}{'time':>10}{'x load+join':>13}{'x join':>8}{'queries':>9}"
            f"{'bound':>9}{'findings':>10}{'judged':>9}"
        )
        for label, seconds, queries, result in rows:
            print(
                f"  {label:<22}{seconds:>9.2f}s{seconds / loading_s:>12.1f}x"
                f"{seconds / floor_s:>7.0f}x{queries:>9}{result.bound:>9,}"
                f"{result.findings_open:>10,}{result.judged_servers:>9,}"
            )
        print(f"  {'floor (load + join)':<22}{loading_s * 1000:>8.1f}ms")
        print(f"  {'floor (dict join)':<22}{floor_s * 1000:>8.1f}ms")
        print(
            f"  one changed server    {one_s * 1000:>8.1f}ms (median of 5, goal 50 ms), "
            f"{one_queries} queries, {one_raised} findings raised"
        )
        print(
            f"  peak Python memory: steady state {peaks[0] / 2**20:.0f} MiB, "
            f"forced {peaks[1] / 2**20:.0f} MiB"
        )


def main() -> None:
    each_size_in_a_fresh_process("reconcile.py", SIZES, run_one)


if __name__ == "__main__":
    main()
