"""Benchmark: one pass of the placement verdicts (`placement.workload_verdicts.judge_workloads`)
on the fleet of `bench/workloads.py` (N servers of 8 GPUs bound to one Slurm cluster's nodes,
2N running jobs packed onto them, applied through `workloads_apply`), no fabric.

Printed: a pass judging 2 workloads and one judging `--limit` (default 200, `JUDGE_LIMIT`),
every workload judged again (`force`): seconds and queries, beside the machine's load. Goal:
the same queries for both, and the second within seconds at 25,000 servers.

    .venv/bin/python bench/verdicts.py --servers 2000
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time

from _django import ROOT, bench_database, machine_load, say, setup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=2000)
    parser.add_argument("--limit", type=int, default=200, help="workloads judged by the pass")
    args = parser.parse_args()
    setup()
    # `bench/workloads.py` by path: the name `workloads` is the Django app's
    spec = importlib.util.spec_from_file_location("bench_workloads", ROOT / "bench/workloads.py")
    assert spec and spec.loader
    fleet = importlib.util.module_from_spec(spec)
    sys.modules["bench_workloads"] = fleet
    spec.loader.exec_module(fleet)
    with bench_database() as (vendor, _):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from clusters.models import Cluster
        from placement.workload_verdicts import judge_workloads

        cluster = Cluster.objects.create(name=fleet.CLUSTER, kind="slurm")
        listing = fleet.Listing()
        start = time.perf_counter()
        fleet.build_fleet(cluster, 0, args.servers)
        jobs = fleet.pack(0, args.servers, 2 * args.servers, listing.next_id)
        listing.add(jobs)
        fleet.mark_used(jobs)
        fleet.apply(cluster, listing.snapshot())
        say(
            f"{vendor}: {args.servers:,} servers, {len(jobs):,} jobs, built in "
            f"{time.perf_counter() - start:.0f} s; machine load {machine_load()}"
        )
        for limit in (2, args.limit):
            with CaptureQueriesContext(connection) as seen:
                start = time.perf_counter()
                result = judge_workloads(force=True, limit=limit)
                seconds = time.perf_counter() - start
            say(
                f"  a pass judging {result.judged:,} of {result.running:,} running: "
                f"{seconds:.2f} s, {len(seen.captured_queries)} queries"
            )


if __name__ == "__main__":
    main()
