"""Benchmark: a Slurm cluster's full jobs listing applied every tick, beside a floor.

A fresh database holds N servers (default 25,000) of 8 GPUs each, bound to the N Slurm nodes
of one cluster, and 2N running jobs (default 50,000): 1-, 2-, 4- and 8-GPU jobs on one node
and 2 x 8 and 4 x 8 jobs over several, packed onto the nodes so no GPU is held twice (97.5%
of the GPUs held). The listing exists twice: as the `WorkloadRecord`s a parser returns, and
as slurmrestd `/slurm/v0.0.41/jobs` JSON in the real schema (`job_state` list, `nodes`
hostlist, `gres_detail` per node as `gpu:h100:4(IDX:4-7)`, times as `{set, infinite,
number}`), so the floor parses the very bytes a cluster would send.

Printed, each beside what it is judged against:

- the first listing (every job new), beside its floor; then, for each `--churn` level
  (default `0,0.05`: the unchanged listing again, then 5% changed), `--ticks` steady-state
  ticks of the full listing with that share of the jobs changed per tick (some end and show
  COMPLETED once, as many start on the GPUs they freed, some pairs are requeued onto each
  other's nodes), each applied from its bytes (`json.loads`, the real parser,
  `workloads_apply`) beside the floor measured in the same tick (`floor_apply`): the same
  `json.loads` and parse, then the least any implementation must do with the parsed listing
  (a fingerprint per job, the stored digests in one read, one bulk upsert of only the
  changed jobs' rows, one bulk close of their open allocations and one bulk insert of the
  GPUs they now hold, rolled back); goal: within 3x of the floor at every churn level, and
  `workloads_apply` alone is printed beside the floor's own part too;
- a changed-job pass: `--pass-jobs` changed jobs alone (an incomplete listing, as pushed
  `/job/{id}` answers), goal < 2 s on PostgreSQL;
- pages at 100 and at N servers with the jobs in: `/workloads/` (or `GET
  /api/v1/workloads/`; "not yet measurable" while neither exists) and a server page
  holding a multi-node job: median time and query count; goal < 200 ms, the same count;
- placement (`placement_find`, Slurm `--gpus=16` and one node of 8) before the jobs are
  applied and after, with their allocations in: goal, no slower;
- with the real parser, the listing POSTed to `/api/v1/clusters/hpc/snapshots/` through
  Django's test client (parse, apply and answer in one request).

    .venv/bin/python bench/workloads.py --servers 1000          # SQLite, quick
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/atlas .venv/bin/python bench/workloads.py

Figures only: nothing exits non-zero on a missed goal (as the other benchmarks).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import random
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from _django import bench_database, machine_load, median, say, setup, timed

GPUS = 8
CLUSTER = "hpc"
GPU_TYPE = "h100"
EPOCH = 1_762_500_000  # a Slurm timestamp near the samples'
# (nodes, GPUs per node, jobs of every 100): 3.9 GPUs a job, so 2 jobs a server hold 97.5%.
SHAPES = ((1, 1, 40), (1, 2, 25), (1, 4, 15), (1, 8, 14), (2, 8, 4), (4, 8, 2))
USERS = [f"user{i:03d}" for i in range(200)]
ACCOUNTS = ["physics", "biology", "nlp", "vision", "climate", "chem"]


@dataclass(slots=True)
class Job:
    """One running job as the scheduler holds it: consecutive nodes, the same GPU indices
    (`first` .. `first + gpus_per_node - 1`) on each."""

    job_id: int
    nodes: tuple[int, ...]
    first: int
    gpus_per_node: int
    user: str
    account: str
    submitted: int
    started: int
    state: str = "RUNNING"
    ended: int = 0


def node_name(number: int) -> str:
    return f"gpu{number:05d}"


def hostlist(nodes: tuple[int, ...]) -> str:
    """Slurm's compressed host list of consecutive nodes: `gpu00004` or `gpu[00004-00005]`."""
    if len(nodes) == 1:
        return node_name(nodes[0])
    return f"gpu[{nodes[0]:05d}-{nodes[-1]:05d}]"


def pack(first_node: int, node_count: int, workloads: int, first_job_id: int) -> list[Job]:
    """`workloads` jobs of the SHAPES mix on nodes `first_node` ..: largest first, so the
    power-of-two sizes fill every node without a gap and never share a GPU."""
    rng = random.Random(first_node)
    sizes = []
    for nodes, per_node, share in SHAPES:
        sizes += [(nodes, per_node)] * (workloads * share // 100)
    sizes += [(1, 1)] * (workloads - len(sizes))
    sizes.sort(key=lambda s: (-s[0] * s[1], -s[1]))
    jobs: list[Job] = []
    node, used = first_node, 0
    end = first_node + node_count
    for offset, (nodes, per_node) in enumerate(sizes):
        if used + per_node > GPUS or (nodes > 1 and used):
            node, used = node + 1, 0
        if node + nodes > end:
            raise SystemExit(f"{workloads:,} jobs do not fit on {node_count:,} nodes")
        submitted = EPOCH - rng.randrange(86_400)
        jobs.append(
            Job(
                job_id=first_job_id + offset,
                nodes=tuple(range(node, node + nodes)),
                first=used,
                gpus_per_node=per_node,
                user=rng.choice(USERS),
                account=rng.choice(ACCOUNTS),
                submitted=submitted,
                started=submitted + rng.randrange(600),
            )
        )
        if nodes > 1:
            node, used = node + nodes, 0
        else:
            used += per_node
    return jobs


def _number(value: int, *, is_set: bool = True) -> dict[str, Any]:
    return {"set": is_set, "infinite": False, "number": value}


def _when(value: int) -> datetime | None:
    return datetime.fromtimestamp(value, tz=UTC) if value else None


def _gres(job: Job) -> str:
    last = job.first + job.gpus_per_node - 1
    idx = str(job.first) if last == job.first else f"{job.first}-{last}"
    return f"gpu:{GPU_TYPE}:{job.gpus_per_node}(IDX:{idx})"


def _tres(job: Job) -> str:
    n, g = len(job.nodes), job.gpus_per_node
    cpus, gpus = 16 * g * n, g * n
    return f"cpu={cpus},mem={128 * gpus}G,node={n},billing={cpus},gres/gpu={gpus}"


def job_json(job: Job) -> dict[str, Any]:
    """The job as slurmrestd v0.0.41 `/jobs` lists it (the fields a real listing carries,
    after `samples/slurm-restd-v0.0.41-job-13-gpu-per-node-2405-slurmweb.json`; the per-core
    detail of `job_resources` left out)."""
    n, g = len(job.nodes), job.gpus_per_node
    cpus = 16 * g * n
    names = [node_name(x) for x in job.nodes]
    tres = _tres(job)
    return {
        "account": job.account,
        "accrue_time": _number(job.submitted),
        "allocating_node": "login",
        "array_job_id": _number(0),
        "array_task_id": _number(0, is_set=False),
        "array_task_string": "",
        "batch_flag": True,
        "batch_host": names[0],
        "flags": ["JOB_WAS_RUNNING", "USING_DEFAULT_QOS"],
        "cluster": CLUSTER,
        "command": f"/home/{job.user}/train.sh",
        "comment": "",
        "contiguous": False,
        "cpus_per_task": _number(16),
        "current_working_directory": f"/home/{job.user}",
        "eligible_time": _number(job.submitted),
        "end_time": _number(job.ended or job.started + 86_400),
        "exit_code": {
            "status": ["SUCCESS"],
            "return_code": _number(0),
            "signal": {"id": _number(0, is_set=False), "name": ""},
        },
        "gres_detail": [_gres(job)] * n,
        "group_id": 10001,
        "group_name": "scientists",
        "het_job_id": _number(0),
        "het_job_offset": _number(0),
        "job_id": job.job_id,
        "job_resources": {
            "select_type": ["CORE"],
            "nodes": {
                "count": n,
                "select_type": ["ONE_ROW"],
                "list": hostlist(job.nodes),
                "whole": False,
                "allocation": [
                    {
                        "index": i,
                        "name": name,
                        "cpus": {"count": 16 * g, "used": 0},
                        "memory": {"used": 0, "allocated": 131072 * g},
                    }
                    for i, name in enumerate(names)
                ],
            },
            "cpus": cpus,
            "threads_per_core": _number(0, is_set=False),
        },
        "job_state": [job.state],
        "last_sched_evaluation": _number(job.started),
        "name": f"train-{job.job_id}",
        "nodes": hostlist(job.nodes),
        "node_count": _number(n),
        "cpus": _number(cpus),
        "tasks": _number(n),
        "partition": "gpu",
        "priority": _number(818),
        "qos": "normal",
        "requeue": True,
        "restart_cnt": 0,
        "shared": [],
        "exclusive": [],
        "start_time": _number(job.started),
        "state_description": "",
        "state_reason": "None",
        "standard_output": f"/home/{job.user}/slurm-{job.job_id}.out",
        "submit_time": _number(job.submitted),
        "suspend_time": _number(0),
        "time_limit": _number(1440),
        "tres_per_node": f"gres/gpu:{g}",
        "tres_req_str": tres,
        "tres_alloc_str": tres,
        "user_id": 10000 + USERS.index(job.user),
        "user_name": job.user,
        "wckey": "",
    }


def job_record(job: Job):
    """The job as `parse_jobs_document` returns it from `job_json` (the same digest: a
    test holds it), for applying the listing without parsing it."""
    from workloads.records import GpuSlot, NodeAllocation, WorkloadRecord, slurm_state

    g = job.gpus_per_node
    slots = tuple(GpuSlot(index=i, gpu_type=GPU_TYPE) for i in range(job.first, job.first + g))
    return WorkloadRecord(
        kind="slurm_job",
        scheduler_id=str(job.job_id),
        state=slurm_state([job.state]),
        name=f"train-{job.job_id}",
        user=job.user,
        account=job.account,
        partition="gpu",
        raw_state=job.state,
        submitted_at=_when(job.submitted),
        started_at=_when(job.started),
        ended_at=_when(job.ended),
        node_count=len(job.nodes),
        gpu_count=g * len(job.nodes),
        gpus_per_node=g,
        requested={
            "tres_per_node": f"gres/gpu:{g}",
            "tres_req_str": _tres(job),
            "tres_alloc_str": _tres(job),
        },
        allocations=tuple(
            NodeAllocation(node=node_name(x), gpu_count=g, gpus=slots) for x in job.nodes
        ),
    )


class Listing:
    """The cluster's jobs now, with their records and JSON entries kept so a tick rebuilds
    only what changed (the cost of building the listing is no part of any figure)."""

    def __init__(self) -> None:
        self.jobs: dict[int, Job] = {}
        self.records: dict[int, Any] = {}
        self.entries: dict[int, dict[str, Any]] = {}
        self.next_id = 1000
        self.rng = random.Random(24)

    def add(self, jobs: list[Job]) -> None:
        for job in jobs:
            self.put(job)
        self.next_id = max(self.jobs, default=self.next_id) + 1

    def put(self, job: Job) -> None:
        self.jobs[job.job_id] = job
        self.records[job.job_id] = job_record(job)
        self.entries[job.job_id] = job_json(job)

    def drop_finished(self) -> None:
        """Jobs shown COMPLETED last tick leave the listing (Slurm's MinJobAge)."""
        for job_id in [j for j, job in self.jobs.items() if job.state != "RUNNING"]:
            del self.jobs[job_id], self.records[job_id], self.entries[job_id]

    def churn(self, changed: int, now: int) -> list[int]:
        """About `changed` jobs change: 40% end (COMPLETED now), as many start on their
        GPUs, 20% are requeued pairwise onto each other's nodes. Returns the changed ids."""
        self.drop_finished()
        running = [j for j in self.jobs.values() if j.state == "RUNNING"]
        ending = self.rng.sample(running, max(1, changed * 2 // 5))
        ids: list[int] = []
        for job in ending:
            job.state, job.ended = "COMPLETED", now
            self.put(job)
            new = Job(
                job_id=self.next_id,
                nodes=job.nodes,
                first=job.first,
                gpus_per_node=job.gpus_per_node,
                user=self.rng.choice(USERS),
                account=self.rng.choice(ACCOUNTS),
                submitted=now - 60,
                started=now,
            )
            self.next_id += 1
            self.put(new)
            ids += [job.job_id, new.job_id]
        ended = {j.job_id for j in ending}
        by_shape: dict[tuple[int, int], list[Job]] = {}
        for job in running:
            if job.job_id not in ended:
                by_shape.setdefault((len(job.nodes), job.gpus_per_node), []).append(job)
        pairs = [s for s, jobs in by_shape.items() if len(jobs) >= 2]
        for _ in range(changed // 10 if pairs else 0):
            shape = self.rng.choice(pairs)
            a, b = self.rng.sample(by_shape[shape], 2)
            if a.job_id in ids or b.job_id in ids:
                continue
            (a.nodes, a.first), (b.nodes, b.first) = (b.nodes, b.first), (a.nodes, a.first)
            a.started = b.started = now
            self.put(a)
            self.put(b)
            ids += [a.job_id, b.job_id]
        return ids

    def snapshot(self, ids: list[int] | None = None):
        from workloads.records import JobsSnapshot

        chosen = self.records.values() if ids is None else [self.records[i] for i in ids]
        return JobsSnapshot(
            format="slurmrestd-jobs",
            scheduler="slurm",
            workloads=tuple(chosen),
            complete=ids is None,
        )

    def raw(self, now: int) -> bytes:
        """The listing as slurmrestd sends it."""
        document = {
            "jobs": list(self.entries.values()),
            "last_backfill": _number(now - 5),
            "last_update": _number(now),
            "meta": {
                "plugin": {
                    "type": "openapi/slurmctld",
                    "name": "Slurm OpenAPI slurmctld",
                    "data_parser": "data_parser/v0.0.41",
                    "accounting_storage": "accounting_storage/slurmdbd",
                },
                "slurm": {
                    "version": {"major": "24", "micro": "3", "minor": "05"},
                    "release": "24.05.3",
                    "cluster": CLUSTER,
                },
            },
            "errors": [],
            "warnings": [],
        }
        return json.dumps(document).encode()


def build_fleet(cluster, first: int, count: int) -> None:
    """Servers `first` .. `first + count - 1` with 8 GPUs each and their Slurm nodes, bound
    (`Node.server` set directly), straight into the tables with bulk_create."""
    from django.utils import timezone

    from clusters.models import Node
    from inventory.models import Gpu, Server

    now = timezone.now()
    numbers = range(first, first + count)
    Server.objects.bulk_create(
        (
            Server(
                identity=f"uuid:{uuid.UUID(int=i + 1)}",
                system_uuid=str(uuid.UUID(int=i + 1)),
                hostname=node_name(i),
                rack=f"rack-{i // 40:04d}",
                last_seen=now,
                last_report_hash=f"bench-{i}",
                pci_gpu_count=GPUS,
            )
            for i in numbers
        ),
        batch_size=5000,
    )
    ids = dict(
        Server.objects.filter(hostname__in=[node_name(i) for i in numbers]).values_list(
            "hostname", "id"
        )
    )
    Gpu.objects.bulk_create(
        (
            Gpu(
                server_id=sid,
                index=g,
                uuid=f"GPU-{sid:08d}-{g}",
                serial=f"165{sid:08d}{g}",
                name="NVIDIA H100 80GB HBM3",
                memory_total_bytes=80 * 2**30,
                numa_node=0 if g < 4 else 1,
            )
            for sid in ids.values()
            for g in range(GPUS)
        ),
        batch_size=5000,
    )
    Node.objects.bulk_create(
        (
            Node(
                cluster=cluster,
                name=node_name(i),
                kind="slurm",
                state="mixed",
                ready=True,
                schedulable=True,
                hostname=node_name(i),
                partitions=["gpu"],
                gpu_capacity=GPUS,
                gpu_allocatable=GPUS,
                gres=[{"name": "gpu", "type": GPU_TYPE, "count": GPUS, "used": 0}],
                server_id=ids[node_name(i)],
                binding_method="hostname",
            )
            for i in numbers
        ),
        batch_size=5000,
    )


def mark_used(jobs: list[Job]) -> None:
    """The nodes' GPUs in use, as the node listing would say: placement reads these."""
    from clusters.models import Node

    used: dict[str, int] = {}
    for job in jobs:
        for x in job.nodes:
            used[node_name(x)] = used.get(node_name(x), 0) + job.gpus_per_node
    by_count: dict[int, list[str]] = {}
    for name, count in used.items():
        by_count.setdefault(count, []).append(name)
    for count, names in by_count.items():
        for start in range(0, len(names), 5000):
            Node.objects.filter(name__in=names[start : start + 5000]).update(
                gpu_used=count,
                gres=[{"name": "gpu", "type": GPU_TYPE, "count": GPUS, "used": count}],
            )


def real_parser() -> Callable[[dict[str, Any]], Any] | None:
    """`parse_jobs_document` once it reads slurmrestd jobs (a placeholder refuses all)."""
    from workloads.parsers.detect import looks_like_jobs_document, parse_jobs_document
    from workloads.records import WorkloadFormatError

    probe = Listing()
    probe.add(pack(1, 1, 1, 1))
    document = json.loads(probe.raw(EPOCH))
    try:
        if not looks_like_jobs_document(document):
            return None
        parse_jobs_document(document)
    except WorkloadFormatError:
        return None
    return parse_jobs_document


def floor_apply(cluster, snapshot, changed: set[str] | None, now: datetime) -> dict[str, float]:
    """The least any implementation must do with a parsed listing, timed in parts, its writes
    rolled back (the product's rows stay as its own apply left them):

    - `compare`: a fingerprint of every record (SHA-1 of its `repr`, the cheapest generic
      one), one read of the cluster's stored (kind, scheduler id, digest), one dict look-up
      per record;
    - `write`: for the `changed` records (all of them when None: the first listing), one bulk
      upsert of their Workload rows, one read of their nodes' ids and GPUs, one bulk UPDATE
      closing their open allocations and one bulk insert of a row per GPU they now hold,
      the ORM's bulk paths, as the product has them.

    Parsing is no part of it (both sides are given the same parsed listing)."""
    import hashlib

    from django.db import transaction
    from django.db.models import F

    from clusters.models import Node
    from inventory.models import Gpu
    from workloads.models import Allocation, Workload
    from workloads.services.apply import RECORD_FIELDS

    records = snapshot.workloads
    start = time.perf_counter()
    fingerprints = {r.scheduler_id: hashlib.sha1(repr(r).encode()).hexdigest() for r in records}
    stored = {
        (kind, sid): digest
        for kind, sid, digest in Workload.objects.filter(cluster=cluster).values_list(
            "kind", "scheduler_id", "digest"
        )
    }
    differ = [
        r for r in records if stored.get((r.kind, r.scheduler_id)) != fingerprints[r.scheduler_id]
    ]
    compare = time.perf_counter() - start
    assert len(differ) == len(records)  # the fingerprints are not the product's: all differ
    chosen = [r for r in records if changed is None or r.scheduler_id in changed]
    with transaction.atomic():
        start = time.perf_counter()
        rows = [
            Workload(
                cluster=cluster,
                kind=r.kind,
                scheduler_id=r.scheduler_id,
                name=r.name,
                user=r.user,
                account=r.account,
                partition=r.partition,
                state=r.state,
                raw_state=r.raw_state,
                submitted_at=r.submitted_at,
                started_at=r.started_at,
                ended_at=r.ended_at,
                node_count=r.node_count,
                gpu_count=r.gpu_count,
                gpus_per_node=r.gpus_per_node,
                requested=r.requested,
                source="floor",
                digest=fingerprints[r.scheduler_id],
                last_seen=now,
            )
            for r in chosen
        ]
        Workload.objects.bulk_create(
            rows,
            batch_size=2000,
            update_conflicts=True,
            unique_fields=["cluster", "kind", "scheduler_id"],
            update_fields=list(RECORD_FIELDS),
        )
        ids = {w.scheduler_id: w.pk for w in rows}
        if any(pk is None for pk in ids.values()):  # no RETURNING on this backend's upsert
            ids = dict(
                Workload.objects.filter(cluster=cluster, scheduler_id__in=list(ids)).values_list(
                    "scheduler_id", "id"
                )
            )
        names = sorted({a.node for r in chosen for a in r.allocations})
        nodes: dict[str, tuple[int, int]] = {}
        for i in range(0, len(names), 2000):
            for name, node_id, server_id in Node.objects.filter(
                cluster=cluster, name__in=names[i : i + 2000]
            ).values_list("name", "id", "server_id"):
                nodes[name] = (node_id, server_id)
        server_ids = sorted({server_id for _, server_id in nodes.values() if server_id})
        gpus: dict[tuple[int, int], int] = {}
        for i in range(0, len(server_ids), 2000):
            for server_id, index, gpu_id in Gpu.objects.filter(
                server_id__in=server_ids[i : i + 2000]
            ).values_list("server_id", "index", "id"):
                gpus[(server_id, index)] = gpu_id
        workload_ids = sorted(ids.values())
        for i in range(0, len(workload_ids), 2000):
            Allocation.objects.filter(
                workload_id__in=workload_ids[i : i + 2000], until__isnull=True
            ).update(until=F("since"))
        allocations = []
        for r in chosen:
            if r.state != "running":
                continue
            for a in r.allocations:
                node_id, server_id = nodes.get(a.node, (None, None))
                for slot in a.gpus:
                    allocations.append(
                        Allocation(
                            workload_id=ids[r.scheduler_id],
                            node_name=a.node,
                            node_id=node_id,
                            server_id=server_id,
                            gpu_id=gpus.get((server_id, slot.index)),
                            index=slot.index,
                            gpu_type=slot.gpu_type or "",
                            since=r.started_at or now,
                        )
                    )
        Allocation.objects.bulk_create(allocations, batch_size=2000)
        write = time.perf_counter() - start
        transaction.set_rollback(True)
    return {
        "compare": compare,
        "write": write,
        "rows": len(chosen),
        "allocations": len(allocations),
    }


def quiet_collector() -> None:
    """Move what the benchmark itself holds (the listing twice over: millions of objects) out
    of the garbage collector's sight, so its full collections during a timed step cost what
    they would in a server process, which holds none of it."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def apply(cluster, snapshot) -> tuple[float, Any, int]:
    """Seconds, the result and the queries of one `workloads_apply`."""
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    from workloads.services.apply import workloads_apply

    reset_queries()
    with CaptureQueriesContext(connection) as ctx:
        start = time.perf_counter()
        result = workloads_apply(cluster=cluster, snapshot=snapshot)
        seconds = time.perf_counter() - start
    return seconds, result, len(ctx.captured_queries)


def pages(client, listing: Listing, servers: int) -> dict[str, tuple[float, int] | None]:
    """Median time of 5 and the query count of the workloads list (its first page and its
    last) and of the page of a server holding a multi-node job; None where the page does not
    exist yet."""
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    from inventory.models import Server

    logging.getLogger("django.request").setLevel(logging.ERROR)  # the 404 probes are expected
    quiet_collector()
    running = [j for j in listing.jobs.values() if j.state == "RUNNING"]
    wide = max(running, key=lambda j: len(j.nodes))
    server_id = Server.objects.get(hostname=node_name(wide.nodes[0])).id
    figures: dict[str, tuple[float, int] | None] = {}
    candidates = (
        ("/workloads/",),
        ("/api/v1/workloads/",),
        ("/workloads/?page=999999",),  # past the end: the paginator answers the last page
        ("/api/v1/workloads/?page=last",),
        ("/gpus/",),
        ("/api/v1/gpus/",),
        (f"/servers/{server_id}/",),
    )
    for urls in candidates:
        url = next(
            (u for u in urls if client.get(u, HTTP_HOST="127.0.0.1").status_code == 200), None
        )
        label = urls[0] if url is None else url
        if url is None:
            figures[label] = None
            continue

        def get(url: str = url) -> None:
            response = client.get(url, HTTP_HOST="127.0.0.1")
            assert response.status_code == 200, (url, response.status_code)

        seconds = median(timed(get, 5))
        reset_queries()
        with CaptureQueriesContext(connection) as ctx:
            get()
        shown = "/servers/<id>/" if label == f"/servers/{server_id}/" else label
        figures[shown] = (seconds, len(ctx.captured_queries))
    return figures


def placement() -> dict[str, tuple[float, int, bool]]:
    """Median of 5 of two placement questions, from refreshed per-server summaries; the
    queries of one, and whether any reads the workloads' tables."""
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    from placement.service import placement_find
    from placement.summaries import placement_summaries_refresh

    placement_summaries_refresh()
    quiet_collector()
    questions = {
        "Slurm --gpus=16": lambda: placement_find(cluster=CLUSTER, gpus=16),
        "one node of 8": lambda: placement_find(cluster=CLUSTER, nodes=1, gpus_per_node=8),
    }
    figures = {}
    for label, ask in questions.items():
        reset_queries()
        with CaptureQueriesContext(connection) as ctx:
            ask()
        touched = any("workloads_" in q["sql"] for q in ctx.captured_queries)
        figures[label] = (median(timed(ask, 5)), len(ctx.captured_queries), touched)
    return figures


def steady_ticks(
    cluster, listing: Listing, parser, now: int, ticks: int, churn: float, figures: dict
) -> tuple[int, bytes]:
    """`ticks` listings 30 s apart with `churn` of the jobs changed in each (0: the same
    listing again, every job unchanged), each applied from its bytes; the median apply
    printed beside the floor measured in the same ticks. Returns the clock and the last
    listing."""
    tick_times: list[float] = []
    parse_times: list[float] = []
    loads_times: list[float] = []
    floors: list[dict[str, float]] = []
    say(f"  churn {churn:.0%}" + (" (the unchanged listing again)" if not churn else ""))
    say(
        f"  {'tick':<6}{'apply':>9}{'queries':>9}{'changed':>9}{'created':>9}{'ended':>7}"
        f"{'allocs +/-':>13}{'floor c+w':>11}"
    )
    raw = b""
    for tick in range(ticks):
        now += 30
        changed: set[str] = set()
        if churn:
            ids = listing.churn(max(1, int(len(listing.jobs) * churn)), now)
            changed = {str(i) for i in ids}
        raw = listing.raw(now)
        quiet_collector()
        start = time.perf_counter()
        document = json.loads(raw)
        loads_times.append(time.perf_counter() - start)
        if parser is not None:
            start = time.perf_counter()
            snapshot = parser(document)
            parse_times.append(time.perf_counter() - start)
        else:
            snapshot = listing.snapshot()
        del document
        seconds, result, queries = apply(cluster, snapshot)
        tick_times.append(seconds)
        quiet_collector()
        floors.append(floor_apply(cluster, snapshot, changed, _when(now)))
        say(
            f"  {tick + 1:<6}{seconds:>8.2f}s{queries:>9}{result.changed + result.created:>9,}"
            f"{result.created:>9,}{result.ended:>7,}"
            f"{result.allocations_opened:>7,}/{result.allocations_closed:<5,}"
            f"{floors[-1]['compare'] + floors[-1]['write']:>10.2f}s"
        )
    steady = median(tick_times)
    loads = median(loads_times)
    parse = median(parse_times) if parse_times else 0.0
    compare = median([f["compare"] for f in floors])
    write = median([f["write"] for f in floors])
    own_floor = compare + write
    floor = loads + parse + own_floor
    parsed_by = "the real parser" if parser else "records built by the bench (no parser yet)"
    size = len(raw) / 2**20
    say(f"  listing: {size:.1f} MiB of slurmrestd v0.0.41 JSON, applied from {parsed_by}")
    say(
        f"  floor: json.loads {loads:.2f} s"
        + (f" + parse_jobs_document {parse:.2f} s" if parser else "")
        + f" + compare {compare:.2f} s (a fingerprint per job, the stored digests in one read)"
        + f" + writes {write:.2f} s ({floors[-1]['rows']:,} rows upserted,"
        + f" {floors[-1]['allocations']:,} allocations written) = {floor:.2f} s"
    )
    total = loads + parse + steady
    say(
        f"  the listing end to end: loads + parse + apply {total:.2f} s, floor {floor:.2f} s,"
        f" ratio {total / floor:.1f}x (target <= 3x)"
    )
    say(
        f"  workloads_apply alone {steady:.2f} s, beside compare + writes {own_floor:.2f} s:"
        f" {steady / own_floor:.1f}x"
    )
    figures.setdefault("churns", {})[churn] = {
        "steady": steady,
        "floor": floor,
        "ratio": total / floor,
        "apply_ratio": steady / own_floor,
    }
    figures.update(steady=steady, floor=floor, ratio=total / floor)
    return now, raw


def run(
    servers: int,
    workloads: int,
    ticks: int = 5,
    churn: float = 0.01,
    churns: tuple[float, ...] | None = None,
    pass_jobs: int = 500,
    small: int = 100,
) -> dict[str, Any]:
    """The whole benchmark on the current database; returns its figures (tests read them)."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from clusters.models import Cluster

    vendor = connection.vendor
    churns = churns if churns is not None else (churn,)
    small = min(small, servers)
    figures: dict[str, Any] = {"vendor": vendor}
    cluster = Cluster.objects.create(name=CLUSTER, kind="slurm")
    user = get_user_model().objects.create_superuser("bench", password="bench-password-1")
    client = Client()
    client.force_login(user)
    listing = Listing()
    say(f"{vendor}: {servers:,} servers, {servers * GPUS:,} GPUs, {workloads:,} running jobs")
    say(f"  machine load {machine_load()}")

    # Pages at `small` servers first, on the same database the full size grows from.
    start = time.perf_counter()
    build_fleet(cluster, 0, small)
    first = pack(0, small, workloads * small // servers, listing.next_id)
    listing.add(first)
    mark_used(first)
    apply(cluster, listing.snapshot())
    figures["pages_small"] = pages(client, listing, small)

    build_fleet(cluster, small, servers - small)
    rest = pack(small, servers - small, workloads - len(first), listing.next_id)
    listing.add(rest)
    mark_used(first + rest)
    say(f"  built in {time.perf_counter() - start:.1f} s")
    figures["placement_before"] = placement()

    snapshot = listing.snapshot()
    quiet_collector()
    fresh = {str(j.job_id) for j in rest}  # the `small` fleet's jobs are applied already
    first_floor = floor_apply(cluster, snapshot, fresh, _when(EPOCH))
    quiet_collector()
    seconds, result, queries = apply(cluster, snapshot)
    first_floor_s = first_floor["compare"] + first_floor["write"]
    say(
        f"  first listing: {seconds:.2f} s, {queries} queries, {result.created:,} created, "
        f"{result.allocations_opened:,} allocations opened; floor {first_floor_s:.2f} s"
        f" (compare {first_floor['compare']:.2f} s, {first_floor['rows']:,} rows and"
        f" {first_floor['allocations']:,} allocations written {first_floor['write']:.2f} s):"
        f" {seconds / first_floor_s:.1f}x (target <= 3x; from records, no parse on either side)"
    )
    figures["first"] = {"apply": seconds, "floor": first_floor_s}

    now = EPOCH + 3600
    parser = real_parser()
    for level in churns:
        now, _ = steady_ticks(cluster, listing, parser, now, ticks, level, figures)
    from workloads.services.apply import allocations_join

    joined = median(timed(lambda: allocations_join(cluster=cluster), 3))
    say(f"  of which allocations_join (every listing, nothing to join): {joined * 1000:.0f} ms")

    now += 30
    changed = listing.churn(pass_jobs, now)
    quiet_collector()
    seconds, result, queries = apply(cluster, listing.snapshot(changed))
    say(
        f"  changed-job pass: {len(changed):,} jobs in {seconds:.2f} s, {queries} queries "
        f"(target < 2 s on PostgreSQL)"
    )
    figures["changed_pass"] = seconds

    figures["placement_after"] = placement()
    for label, (before, before_q, _) in figures["placement_before"].items():
        after, after_q, reads = figures["placement_after"][label]
        say(
            f"  placement {label:<16} without allocations {before * 1000:5.0f} ms {before_q} q, "
            f"with {after * 1000:5.0f} ms {after_q} q ({after / before:.2f}x; target: not worse)"
            + ("" if reads else "; reads no workload table")
        )

    figures["pages"] = pages(client, listing, servers)
    say(f"  {'page':<30}{small:>8,} servers{servers:>9,} servers   (target < 200 ms, same queries)")
    for label, large in figures["pages"].items():
        little = figures["pages_small"].get(label)
        if large is None or little is None:
            say(f"  {label:<30}not yet measurable (404: the page is not built on this branch)")
            continue
        say(
            f"  {label:<30}{little[0] * 1000:>7.0f} ms {little[1]:>3} q"
            f"{large[0] * 1000:>9.0f} ms {large[1]:>3} q"
        )

    if parser is not None:
        from placement.tasks import judge_workloads

        # What follows each listing judges the workloads whose GPUs changed since their
        # last judgement; the direct applies above were never judged: judge them all first.
        start = time.perf_counter()
        judged = judge_workloads()
        figures["judge_all"] = time.perf_counter() - start
        say(f"  placement verdicts, first judgement: {judged:,} in {figures['judge_all']:.1f} s")
        now += 30
        listing.churn(max(1, int(len(listing.jobs) * churn)), now)
        body = listing.raw(now)
        start = time.perf_counter()
        response = client.post(
            f"/api/v1/clusters/{CLUSTER}/snapshots/",
            data=body,
            content_type="application/json",
            HTTP_HOST="127.0.0.1",
        )
        seconds = time.perf_counter() - start
        assert response.status_code == 201, (response.status_code, response.content[:300])
        say(
            f"  POST snapshots/ ({len(body) / 2**20:.1f} MiB, in-process, the follow-ups run"
            f" inline without a broker): {seconds:.2f} s"
        )
        figures["post"] = seconds
    gc.unfreeze()
    figures["listing"] = listing
    return figures


def http_post(listing: Listing, now: int, churn: float) -> float:
    """The production shape (deploy/systemd: gunicorn sync workers, `--timeout 60`; a
    private Redis and one Celery worker for the follow-ups) on the benchmark's PostgreSQL
    database: the next tick's listing POSTed with a person's token. Seconds to the 201."""
    import http.client
    import os
    import shutil
    import tempfile
    from contextlib import ExitStack
    from pathlib import Path

    from django.contrib.auth import get_user_model
    from django.db import connection
    from load import celery_worker, free_port, process

    from inventory.services.tokens import user_token_create

    settings = connection.settings_dict
    db_url = (
        f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
    )
    _, key = user_token_create(user=get_user_model().objects.get(username="bench"), name="bench")
    listing.churn(max(1, int(len(listing.jobs) * churn)), now)
    body = listing.raw(now)
    work = Path(tempfile.mkdtemp(prefix="atlas-workloads-"))
    redis_port, port = free_port(), free_port()
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "workloads-bench-" + uuid.uuid4().hex,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "ATLAS_LOG_LEVEL": "WARNING",
        "ATLAS_VAR_DIR": str(work / "var"),
        "C_FORCE_ROOT": "1",
    }
    env.pop("CELERY_BROKER_URL", None)
    redis = [shutil.which("redis-server") or "redis-server", "--port", str(redis_port)]
    redis += ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    gunicorn = [str(Path(sys.executable).parent / "gunicorn"), "config.wsgi"]
    gunicorn += ["--bind", f"127.0.0.1:{port}", "--workers", "2", "--timeout", "60"]
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, work, True)
        stack.enter_context(
            process(redis, env=env, what="redis", log=work / "r.log", port=redis_port)
        )
        stack.enter_context(celery_worker(1, 1, env, work, work / "celery.log"))
        stack.enter_context(
            process(gunicorn, env=env, what="gunicorn", log=work / "g.log", port=port)
        )
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        for _ in range(4):  # both workers booted and warm (the master listens before them)
            conn.request(
                "GET", f"/api/v1/clusters/{CLUSTER}/", headers={"Authorization": f"Token {key}"}
            )
            conn.getresponse().read()
        start = time.perf_counter()
        conn.request(
            "POST",
            f"/api/v1/clusters/{CLUSTER}/snapshots/",
            body=body,
            headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
        )
        response = conn.getresponse()
        answer = response.read()
        seconds = time.perf_counter() - start
        if response.status != 201:
            say(
                f"  POST through gunicorn: {response.status} after {seconds:.1f} s {answer[:200]!r}"
            )
            say("  " + (work / "g.log").read_text()[-400:].replace("\n", "\n  "))
            return seconds
    say(
        f"  POST snapshots/ through gunicorn (2 sync workers, timeout 60 s; {len(body) / 2**20:.1f}"
        f" MiB): {seconds:.2f} s to the 201"
    )
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=25_000)
    parser.add_argument("--workloads", type=int, help="running jobs (default: 2 per server)")
    parser.add_argument("--ticks", type=int, default=5, help="steady-state listings applied")
    parser.add_argument(
        "--churn",
        type=lambda text: tuple(float(v) for v in text.split(",")),
        default=(0.0, 0.05),
        help="jobs changed per tick, one level or several ('0,0.05': the unchanged listing,"
        " then 5%% changed)",
    )
    parser.add_argument("--pass-jobs", type=int, default=500, help="jobs of the changed pass")
    parser.add_argument(
        "--http", action="store_true", help="also POST through gunicorn (PostgreSQL only)"
    )
    args = parser.parse_args()
    setup()
    with bench_database() as (vendor, _):
        figures = run(
            args.servers,
            args.workloads or 2 * args.servers,
            ticks=args.ticks,
            churns=args.churn,
            pass_jobs=args.pass_jobs,
        )
        if args.http and vendor == "postgresql" and "post" in figures:
            from django.db import connection

            connection.close()  # gunicorn's workers and the worker take their own
            http_post(figures["listing"], EPOCH + 10 * 3600, max(args.churn[-1], 0.01))


if __name__ == "__main__":
    main()
