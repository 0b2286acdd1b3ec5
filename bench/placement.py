"""Benchmark: a placement query and a failure-domain query at 25,000 servers, beside floors.

A fresh database holds N servers (default 25,000) of 8 GPUs each: 90% NVLink (NV18 between
every pair), 10% PCIe (PIX pairs, NODE within a socket, SYS across) so the pair-link path is
exercised; one NIC each on a leaf switch per rack of 40; half the servers are Kubernetes
nodes, half Slurm nodes, some busy, a few drained. Printed per query: the median time, the
query count, and two floors: the raw SQL fetch of the rows the query needs (what any answer
from the database costs), and a plain in-memory scan of the same data already in Python
(the arithmetic alone, no database).

    .venv/bin/python bench/placement.py              # 25,000 servers, SQLite
    .venv/bin/python bench/placement.py 5000
    BENCH_ALLOCATIONS=1 .venv/bin/python bench/placement.py   # running workloads hold the busy GPUs
    BENCH_FABRIC=0 .venv/bin/python bench/placement.py        # without the fabric
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/atlas .venv/bin/python bench/placement.py
    BENCH_DB=/tmp/place-25000.sqlite3 .venv/bin/python bench/placement.py   # reuse a build

`BENCH_DB` (SQLite only): the built database (fleet, fabric, summaries) is saved to that
file, or restored from it when it exists, so runs after the first skip the build (the file
does not record N or the options: one file per size and `BENCH_ALLOCATIONS`/`BENCH_FABRIC`).

Placement and failure domains read the per-server summaries (`topology.ServerPlacement`),
backfilled after the build (its time is printed); the floors read the tables themselves.

With the fabric (the default; `BENCH_FABRIC=0` leaves it out): `bench/fabric.py`'s
rail-optimised fat tree (8 rails, 32 servers a leaf, the 8 rail leaves of a unit one leaf
group, 8 units and 16 spines a pod, 512 cores) imported through `fabric_snapshot_ingest`,
the leaf summaries built (`placement.leaf_summaries`), and multi-node Slurm questions (2 x 8
near one leaf, 16 x 8 under one spine group, one that fits nowhere), each beside its floor:
the node rows, the usable GPU counts (one summary row a server), the held GPUs per node and
the leaf rows fetched by hand, then the scan that picks the first leaf (spine group) with
enough nodes free. Every figure is printed beside its floor and the goal (3x, issue 27).
Then what reading the cables instead costs (a question whose leaf summaries are stale), and,
with the allocations in, the held GPUs as placement reads them (grouped per node) beside a
row per held GPU.
"""

from __future__ import annotations

import os
import sys
import time
import uuid

from _django import bench_database, machine_load, median, setup, timed

SIZE = next((int(a) for a in sys.argv[1:] if a.isdigit()), 25_000)
REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
GOAL = 3.0  # issue 27: each question within 3x of its floor
GPUS = 8
RACK = 40
ALLOCATIONS = os.environ.get("BENCH_ALLOCATIONS", "") not in ("", "0")
FABRIC = os.environ.get("BENCH_FABRIC", "1") not in ("", "0")
SAVED = os.environ.get("BENCH_DB", "")
LAYOUT = {  # bench/fabric.py's: 8 rails, 32 servers a leaf, 8 units a pod, 16 spines a pod
    "rails": 8,
    "servers_per_leaf": 32,
    "leaf_uplinks": 16,
    "pods_of": 8,
    "spines_per_pod": 16,
    "cores": 512,
}


def pcie_class(a: int, b: int) -> str:
    if a // 2 == b // 2:
        return "PIX"
    return "NODE" if (a < 4) == (b < 4) else "SYS"


def build(n: int) -> None:
    """The fleet, straight into the tables with bulk_create (no report pipeline)."""
    from django.utils import timezone

    from clusters.models import Cluster, Node
    from inventory.models import Gpu, Link, Nic, Server

    now = timezone.now()
    batch = 5000
    Server.objects.bulk_create(
        (
            Server(
                identity=f"uuid:{uuid.UUID(int=i + 1)}",
                system_uuid=str(uuid.UUID(int=i + 1)),
                hostname=f"gpu{i + 1:05d}",  # as `fabric.synthetic` names them
                rack=f"rack-{i // RACK:04d}",
                rack_position=i % RACK + 1,
                last_seen=now,
                last_report_hash=f"bench-{i}",
            )
            for i in range(n)
        ),
        batch_size=batch,
    )
    ids = list(Server.objects.order_by("id").values_list("id", flat=True))
    pcie = {sid for i, sid in enumerate(ids) if i % 20 in (18, 19)}  # both clusters
    Gpu.objects.bulk_create(
        (
            Gpu(
                server_id=sid,
                index=g,
                uuid=f"GPU-{sid:08d}-{g}",
                name="NVIDIA L40S" if sid in pcie else "NVIDIA H100 80GB HBM3",
                memory_total_bytes=(48 if sid in pcie else 80) * 2**30,
                numa_node=0 if g < 4 else 1,
                status="lost" if (sid % 997 == 0 and g == 7) else "ok",
            )
            for sid in ids
            for g in range(GPUS)
        ),
        batch_size=batch,
    )
    gpu_ids: dict[tuple[int, int], int] = {
        (s, i): g for g, s, i in Gpu.objects.values_list("id", "server_id", "index")
    }
    Nic.objects.bulk_create(
        (
            Nic(server_id=sid, name="mlx5_0", switch=f"leaf-{i // RACK:04d}", numa_node=0)
            for i, sid in enumerate(ids)
        ),
        batch_size=batch,
    )
    nics = dict(Nic.objects.values_list("server_id", "id"))
    Link.objects.bulk_create(
        (
            Link(
                server_id=sid,
                gpu_a_id=gpu_ids[sid, a],
                gpu_b_id=gpu_ids[sid, b],
                link_class=pcie_class(a, b) if sid in pcie else "NV18",
            )
            for sid in ids
            for a in range(GPUS)
            for b in range(a + 1, GPUS)
        ),
        batch_size=batch,
    )
    Link.objects.bulk_create(
        (
            Link(server_id=sid, gpu_a_id=gpu_ids[sid, a], nic_id=nics[sid], link_class="PIX")
            for sid in ids
            for a in (0, 1)
        ),
        batch_size=batch,
    )
    k8s = Cluster.objects.create(name="prod", kind="kubernetes")
    slurm = Cluster.objects.create(name="hpc", kind="slurm")
    nodes = []
    for i, sid in enumerate(ids):
        used = (i * 7) % 9 if i % 3 else 0  # 0..8 GPUs in use
        drained = i % 50 == 0
        kind = "kubernetes" if i % 2 == 0 else "slurm"
        cluster = k8s if kind == "kubernetes" else slurm
        nodes.append(
            Node(
                cluster=cluster,
                name=f"gpu{i + 1:05d}",
                kind=kind,
                state="idle" if kind == "slurm" else "ready",
                state_flags=["drain"] if drained and kind == "slurm" else [],
                ready=True,
                schedulable=not drained,
                partitions=["gpu"] if kind == "slurm" else [],
                gpu_capacity=GPUS,
                gpu_allocatable=GPUS,
                gpu_used=min(used, GPUS),
                gres=(
                    [{"name": "gpu", "type": "h100", "count": GPUS, "used": min(used, GPUS)}]
                    if kind == "slurm"
                    else []
                ),
                server_id=sid,
                binding_method="hostname" if kind == "slurm" else "system_uuid",
            )
        )
    Node.objects.bulk_create(nodes, batch_size=batch)
    if ALLOCATIONS:
        allocate(batch)


def allocate(batch: int) -> None:
    """A running workload on each busy node holding its first `gpu_used` GPUs by index (the
    allocations placement reads: `BENCH_ALLOCATIONS=1`)."""
    from django.utils import timezone

    from clusters.models import Node
    from workloads.models import Allocation, Workload

    now = timezone.now()
    busy = list(
        Node.objects.filter(gpu_used__gt=0).values_list(
            "id", "name", "cluster_id", "server_id", "kind", "gpu_used"
        )
    )
    Workload.objects.bulk_create(
        (
            Workload(
                cluster_id=cluster_id,
                kind="slurm_job" if kind == "slurm" else "pods",
                scheduler_id=f"{node_id}",
                user=f"user{node_id % 40}",
                state="running",
                started_at=now,
                node_count=1,
                gpu_count=used,
                gpus_per_node=used,
            )
            for node_id, _name, cluster_id, _sid, kind, used in busy
        ),
        batch_size=batch,
    )
    workload_of = dict(Workload.objects.values_list("scheduler_id", "id"))
    Allocation.objects.bulk_create(
        (
            Allocation(
                workload_id=workload_of[str(node_id)],
                node_name=name,
                node_id=node_id,
                server_id=sid,
                index=g,
                since=now,
            )
            for node_id, name, _cid, sid, _kind, used in busy
            for g in range(used)
        ),
        batch_size=batch,
    )
    print(f"  allocations: {Allocation.objects.count():,} GPUs held by {len(busy):,} workloads")


def load_fabric(n: int) -> None:
    """The rail-optimised fabric of the N servers, straight into the tables with bulk_create
    as `build` does (importing its ibnetdiscover text took 173 s at 2,500 servers here):
    `fabric.synthetic`'s layout, tiers and leaf groups as the import infers them (the 8 rail
    leaves of a unit one group), leaf-to-spine cables; the cores (tier 3) are left out,
    placement's spine groups stop at tier 2. Then the leaf summaries; both times printed."""
    from math import ceil

    from fabric.models import Adapter, Fabric, FabricLink, Switch
    from inventory.models import Server
    from inventory.services import revision_bump
    from placement.leaf_summaries import leaf_summaries_refresh

    start = time.perf_counter()
    rails, per_leaf = LAYOUT["rails"], LAYOUT["servers_per_leaf"]
    uplinks, pods_of, spines_per_pod = (
        LAYOUT["leaf_uplinks"],
        LAYOUT["pods_of"],
        LAYOUT["spines_per_pod"],
    )
    units = ceil(n / per_leaf)
    pods = ceil(units / pods_of)
    fabric = Fabric.objects.create(name="bench")
    guid = iter(range(1, 1 << 40))
    leaves = [
        Switch(
            fabric=fabric,
            guid=f"{next(guid):016x}",
            name=f"leaf-su{u + 1:04d}-r{r + 1}",
            tier_inferred=1,
            rail=r + 1,
            leaf_group=u + 1,
        )
        for u in range(units)
        for r in range(rails)
    ]
    spines = [
        Switch(
            fabric=fabric,
            guid=f"{next(guid):016x}",
            name=f"spine-p{p + 1:03d}-{i + 1:02d}",
            tier_inferred=2,
        )
        for p in range(pods)
        for i in range(spines_per_pod)
    ]
    Switch.objects.bulk_create(leaves + spines, batch_size=5000)
    switch = dict(Switch.objects.filter(fabric=fabric).values_list("name", "id"))
    servers = dict(Server.objects.values_list("hostname", "id"))
    Adapter.objects.bulk_create(
        (
            Adapter(
                fabric=fabric,
                guid=f"{next(guid):016x}",
                description=f"gpu{i + 1:05d} mlx5_{r}",
                host_name=f"gpu{i + 1:05d}",
                nic=f"mlx5_{r}",
                server_id=servers[f"gpu{i + 1:05d}"],
                binding_method="description",
                rail=r + 1,
                nic_rail=r + 1,
            )
            for i in range(n)
            for r in range(rails)
        ),
        batch_size=5000,
    )
    adapters = dict(Adapter.objects.filter(fabric=fabric).values_list("description", "id"))
    state = {"width": "4x", "lane_speed": "NDR", "gbps": 400.0, "state": "up"}
    FabricLink.objects.bulk_create(
        (
            FabricLink(
                fabric=fabric,
                key=f"s{leaf}:{i % per_leaf + 1}",
                a_switch_id=leaf,
                a_port=i % per_leaf + 1,
                b_adapter_id=adapters[f"gpu{i + 1:05d} mlx5_{r}"],
                b_port=1,
                **state,
            )
            for i in range(n)
            for r in range(rails)
            for leaf in [switch[f"leaf-su{i // per_leaf + 1:04d}-r{r + 1}"]]
        ),
        batch_size=5000,
    )
    FabricLink.objects.bulk_create(
        (
            FabricLink(
                fabric=fabric,
                key=f"s{switch[leaf.name]}:{per_leaf + k + 1}",
                a_switch_id=switch[leaf.name],
                a_port=per_leaf + k + 1,
                b_switch_id=switch[f"spine-p{(u // pods_of) + 1:03d}-{k % spines_per_pod + 1:02d}"],
                b_port=(u % pods_of) * rails + r + 1,
                **state,
            )
            for leaf, u, r in (
                (leaves[u * rails + r], u, r) for u in range(units) for r in range(rails)
            )
            for k in range(uplinks)
        ),
        batch_size=5000,
    )
    revision_bump(name="fabric")
    cables = FabricLink.objects.count()
    print(
        f"  fabric: {len(leaves):,} leaves, {len(spines):,} spines, {cables:,} cables "
        f"({n * rails:,} to servers) loaded in {time.perf_counter() - start:.0f} s"
    )
    start = time.perf_counter()
    built = leaf_summaries_refresh(force=True)
    print(f"  leaf summaries built: {built:,} in {time.perf_counter() - start:.1f} s")


def fabric_questions(fetch, placement_rows, measure_fn) -> None:
    """Multi-node Slurm questions on the fabric, each beside its floor; what reading the
    cables instead costs; with the allocations in, the held GPUs."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from placement.leaves import leaf_summaries
    from placement.selectors import cable_places, held_gpus
    from placement.service import placement_find

    leaf_sql = "SELECT leaf, spine, servers FROM placement_leafplacement WHERE leaf <> ''"
    held_sql = (
        "SELECT node_id, COUNT(*) FROM workloads_allocation WHERE until IS NULL"
        " AND node_id IS NOT NULL GROUP BY node_id"
    )

    def rows():
        nodes, healthy = placement_rows()
        held = dict(fetch(held_sql)()) if ALLOCATIONS else {}
        return nodes, healthy, fetch(leaf_sql)(), held

    def scan(found, count: int, per_node: int, by: int) -> list:
        """The first leaf (by=0) or spine group (by=1) with `count` Slurm nodes of
        `per_node` free GPUs: the arithmetic, nothing else."""
        import json

        nodes, healthy, leaves, held = found
        free = {
            sid: min(alloc - max(used or 0, held.get(nid, 0)), healthy.get(sid, 0))
            for nid, alloc, used, ready, schedulable, sid, k in nodes
            if ready and schedulable and k == "slurm"
        }
        groups: dict[str, list[int]] = {}
        for row in leaves:
            fitting = [s for s in json.loads(row[2]) if free.get(s, 0) >= per_node]
            groups.setdefault(row[by] or row[0], []).extend(fitting)
        for servers in groups.values():
            if len(servers) >= count:
                return servers[:count]
        return []

    for label, ask, count, per_node, by in (
        ("placement: Slurm 2 x 8 near one leaf", {"nodes": 2}, 2, 8, 0),
        ("placement: Slurm 16 x 8, one spine group", {"nodes": 16}, 16, 8, 1),
        ("placement: Slurm 2 x 9 (no node has 9)", {"nodes": 2, "per": 9}, 2, 9, 0),
        ("placement: Slurm 5,000 x 8 (too few free)", {"nodes": 5000}, 5000, 8, 1),
    ):
        ask = {"gpus_per_node": ask.pop("per", 8), **ask}
        with CaptureQueriesContext(connection) as ctx:
            answer = placement_find(cluster="hpc", **ask)
        cables = sum("fabric_fabriclink" in q["sql"] for q in ctx.captured_queries)
        measure_fn(
            label,
            lambda ask=ask: placement_find(cluster="hpc", **ask),
            rows,
            lambda found, c=count, m=per_node, b=by: scan(found, c, m, b),
        )
        where = (
            f"{answer.fabric['leaves']} leaf, {answer.fabric['spine_groups']} spine group"
            if answer.fits and answer.fabric
            else (answer.reason or "")[:60]
        )
        print(f"    fits: {answer.fits} ({where}); queries reading cables: {cables}")
    start = time.perf_counter()
    summaries = leaf_summaries(cable_places())
    took = time.perf_counter() - start
    print(
        f"  the places from every cable instead (stale leaf summaries): {took * 1000:.0f} ms"
        f" for {len(summaries):,} leaf rows"
    )
    if ALLOCATIONS:
        from django.db.models import IntegerField
        from django.db.models.functions import Coalesce

        from workloads.models import Allocation

        start = time.perf_counter()
        held = held_gpus()
        grouped = time.perf_counter() - start
        start = time.perf_counter()
        every = list(  # as placement read them before: a row per held GPU, its index joined
            Allocation.objects.filter(
                until__isnull=True, node__isnull=False, mig_device__isnull=True
            )
            .order_by()
            .values_list(
                "node_id",
                Coalesce("gpu__index", "index", output_field=IntegerField()),
                "workload_id",
            )
        )
        per_gpu = time.perf_counter() - start
        print(
            f"  held GPUs: {grouped * 1000:.0f} ms for {len(held):,} nodes grouped"
            f" (a row per held GPU: {per_gpu * 1000:.0f} ms for {len(every):,} rows)"
        )


def save(path: str) -> None:
    """The built database into `path` (SQLite's VACUUM INTO), for `BENCH_DB`."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM INTO %s", [path])
    print(f"  saved to {path}")


def restore(path: str) -> None:
    """The database saved by `save` copied into the run's (SQLite's backup API, its
    statistics with it)."""
    import sqlite3

    from django.db import connection

    connection.ensure_connection()
    source = sqlite3.connect(path)
    try:
        source.backup(connection.connection)
    finally:
        source.close()


def measure(label: str, fn, floor_fetch, floor_scan) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    fn()  # warm
    connection.queries_log.clear()  # the build filled the log: counts start afresh
    with CaptureQueriesContext(connection) as ctx:
        answer = fn()
    t = median(timed(fn, REPEAT))
    rows = floor_fetch()
    fetch = median(timed(floor_fetch, REPEAT))
    scan = median(timed(lambda: floor_scan(rows), REPEAT))
    ratio = t / (fetch + scan)
    print(
        f"  {label:<44} {t * 1000:8.0f} ms  {len(ctx.captured_queries):3d} queries"
        f"   floor: fetch {fetch * 1000:6.0f} ms, scan {scan * 1000:5.0f} ms"
        f"   ({ratio:.1f}x fetch+scan; goal {GOAL:g}x: {'met' if ratio <= GOAL else 'not met'})"
    )
    return answer


def main() -> None:
    setup()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from placement.failure_domains import failure_domain, failure_domain_ranking
    from placement.service import placement_find

    def fetch(sql: str):
        def run():
            with connection.cursor() as cursor:
                cursor.execute(sql)
                return cursor.fetchall()

        return run

    nodes_sql = (
        "SELECT n.id, n.gpu_allocatable, n.gpu_used, n.ready, n.schedulable, n.server_id,"
        " c.kind FROM clusters_node n JOIN clusters_cluster c ON c.id = n.cluster_id"
        " WHERE n.gone_at IS NULL"
    )
    gpus_sql = (
        "SELECT server_id, COUNT(*) FROM inventory_gpu WHERE status = 'ok' GROUP BY server_id"
    )

    # the usable GPUs per server as the least an answer must read them: one small row per
    # server from the per-server summaries (what placement reads), not a GROUP BY over every
    # GPU row (25,000 servers: 200,000 rows, most of the floor's time, and a floor that costs
    # more than it must flatters every ratio beside it)
    usable_sql = "SELECT server_id, usable FROM topology_serverplacement"

    def placement_rows():
        return fetch(nodes_sql)(), dict(fetch(usable_sql)())

    def placement_scan(rows, kind: str = "slurm", need: int = 16) -> list:
        """The fewest nodes with the most free GPUs: the arithmetic, nothing else."""
        nodes, healthy = rows
        free = [
            (min(alloc - (used or 0), healthy.get(sid, 0)), nid)
            for nid, alloc, used, ready, schedulable, sid, k in nodes
            if ready and schedulable and k == kind
        ]
        free.sort(reverse=True)
        chosen, total = [], 0
        for f, nid in free:
            if total >= need:
                break
            chosen.append(nid)
            total += f
        return chosen

    rack = "rack-0001"
    domain_sql = (
        "SELECT s.id, s.physical_host_id, (SELECT COUNT(*) FROM inventory_gpu g"
        " WHERE g.server_id = s.id AND g.status <> 'lost') FROM inventory_server s"
    )
    node_sql = "SELECT server_id, gpu_capacity, cluster_id FROM clusters_node WHERE gone_at IS NULL"
    servers_sql = "SELECT id, rack, physical_host_id FROM inventory_server"

    def domain_rows():
        return fetch(servers_sql)(), fetch(node_sql)(), dict(fetch(gpus_sql)())

    def domain_scan(rows):
        servers, nodes, gpus = rows
        lost = {sid for sid, r, _ in servers if r == rack}
        lost_gpus = sum(gpus.get(s, 0) for s in lost)
        capacity: dict[int, list[int]] = {}
        for sid, cap, cid in nodes:
            entry = capacity.setdefault(cid, [0, 0])
            entry[0] += cap
            if sid in lost:
                entry[1] += cap
        return lost_gpus, capacity

    def ranking_scan(rows):
        servers, _, gpus = rows
        racks: dict[str, int] = {}
        for sid, r, _ in servers:
            racks[r] = racks.get(r, 0) + gpus.get(sid, 0)
        return sorted(racks.items(), key=lambda kv: -kv[1])[:50]

    del domain_sql
    with bench_database() as (vendor, _):
        if SAVED and os.path.exists(SAVED):
            restore(SAVED)
            print(
                f"{vendor}: {SIZE:,} servers restored from {SAVED}; median of {REPEAT};"
                f" load average {machine_load()}"
            )
        else:
            start = time.perf_counter()
            build(SIZE)
            built = time.perf_counter() - start
            print(
                f"{vendor}: {SIZE:,} servers, {SIZE * GPUS:,} GPUs, {SIZE:,} nodes "
                f"(built in {built:.0f} s); median of {REPEAT}; load average {machine_load()}"
            )
            if FABRIC:
                load_fabric(SIZE)
            from placement.summaries import placement_summaries_refresh

            start = time.perf_counter()
            summaries = placement_summaries_refresh()
            print(
                f"  placement summaries backfilled: {summaries:,} in "
                f"{time.perf_counter() - start:.1f} s"
            )
            if SAVED:
                save(SAVED)
        fits = measure(
            "placement: Slurm --gpus=16, all clusters",
            lambda: placement_find(gpus=16),
            placement_rows,
            placement_scan,
        )
        assert fits.fits and fits.total_gpus == 16, fits.reason
        pod = measure(
            "placement: Kubernetes pod of 4 GPUs",
            lambda: placement_find(cluster="prod", gpus=4),
            placement_rows,
            lambda rows: placement_scan(rows, "kubernetes", 4),
        )
        assert pod.fits and pod.nodes[0].link_class == "NV18"
        measure(
            "placement: pod of 4 L40S (PCIe pair links)",
            lambda: placement_find(cluster="prod", gpus=4, model="L40S"),
            placement_rows,
            lambda rows: placement_scan(rows, "kubernetes", 4),
        )
        misfit = measure(
            "placement: pod of 9 (no fit, alternatives)",
            lambda: placement_find(cluster="prod", gpus=9),
            placement_rows,
            lambda rows: placement_scan(rows, "kubernetes", 9),
        )
        assert not misfit.fits and misfit.alternatives
        domain = measure(
            f"failure domain: rack {rack}",
            lambda: failure_domain(rack=rack),
            domain_rows,
            domain_scan,
        )
        assert domain["servers"] == RACK, domain["servers"]
        measure(
            "failure domain: one server",
            lambda: failure_domain(server=RACK + 1),
            domain_rows,
            domain_scan,
        )
        measure(
            "failure-domain ranking by rack",
            lambda: failure_domain_ranking(by="rack"),
            domain_rows,
            ranking_scan,
        )
        if FABRIC:
            fabric_questions(fetch, placement_rows, measure)
        if ALLOCATIONS:
            from placement.workload_verdicts import JUDGE_LIMIT, judge_workloads

            with CaptureQueriesContext(connection) as ctx:
                start = time.perf_counter()
                judged = judge_workloads(force=True).judged
                took = time.perf_counter() - start
            start = time.perf_counter()
            judge_workloads(limit=0)  # the digests compared, nothing judged
            idle = time.perf_counter() - start
            print(
                f"  workload verdicts: {judged} judged (at most {JUDGE_LIMIT} a pass) in "
                f"{took * 1000:.0f} ms, {len(ctx.captured_queries)} queries; comparing "
                f"the digests alone {idle * 1000:.0f} ms"
            )


if __name__ == "__main__":
    main()
