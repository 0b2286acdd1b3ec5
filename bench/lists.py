"""Benchmark: every list's first and last page at 130,000 nodes, beside one indexed SELECT.

A fresh database holds `--servers` servers (default 25,000) with 8 GPUs each, bound to the
Slurm nodes of one cluster and running 2 jobs a server applied through the real
`workloads_apply` (bench/workloads.py's fleet and listing), then as many unbound nodes in 12
more clusters as make `--nodes` (default 130,000), an open finding on every 50th node, and
fresh statistics and visibility map for every table (one VACUUM ANALYZE of the database: the
steady state, where a node-set apply has vacuumed the nodes itself, core/db/statistics.py, and
autovacuum the servers, GPUs, jobs and findings that arrive report by report).

Printed for each list (API `nodes/`, `servers/`, `gpus/`, `findings/`, `workloads/` and the
pages `/nodes/`, `/servers/`, `/gpus/`, `/findings/`, `/workloads/`, and a server page
holding a 4 x 8 job): its first and its last page, median of `--repeat` requests through
Django's test client (session, filters, pagination, serializer or template), with the query
count of one (on a web process's connection: core/db/bounds.py), beside the floor measured in
the same run: the same rows read by one indexed
query (`SELECT * FROM <table> WHERE id = ANY(<the page's ids>)`). Goal: each page under
200 ms and the same query count on the first and the last page.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/atlas \
        .venv/bin/python bench/pages.py --nodes 130000
    DATABASE_URL=... .venv/bin/python bench/lists.py --nodes 13000 --servers 2500   # quicker

Figures only: nothing exits non-zero on a missed goal (as the other benchmarks).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from _django import bench_database, machine_load, median, say, setup, timed
from nodes_list import bulk_nodes, node_findings

HERE = Path(__file__).resolve().parent
CLUSTERS = 12
API = {  # list -> its table (the floor reads the page's rows from it by id)
    "/api/v1/nodes/": "clusters_node",
    "/api/v1/servers/": "inventory_server",
    "/api/v1/gpus/": "inventory_gpu",
    "/api/v1/findings/": "clusters_finding",
    "/api/v1/workloads/": "workloads_workload",
}
PAGES = {
    "/nodes/": "clusters_node",
    "/servers/": "inventory_server",
    "/gpus/": "inventory_gpu",
    "/findings/": "clusters_finding",
    "/workloads/": "workloads_workload",
}


def workloads_bench() -> Any:
    """bench/workloads.py as a module: its name is the `workloads` app's on the path."""
    spec = importlib.util.spec_from_file_location("workloads_bench", HERE / "workloads.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def load(nodes: int, servers: int) -> dict[str, Any]:
    """The fleet, its jobs, the other clusters' nodes and some findings; vacuumed and ANALYZEd."""
    from django.db import connection

    from clusters.models import Cluster, Node
    from inventory.models import Server

    bench = workloads_bench()
    Listing, apply, build_fleet, mark_used, node_name, pack = (
        bench.Listing,
        bench.apply,
        bench.build_fleet,
        bench.mark_used,
        bench.node_name,
        bench.pack,
    )
    start = time.perf_counter()
    hpc = Cluster.objects.create(name="hpc", kind="slurm")
    build_fleet(hpc, 0, servers)
    listing = Listing()
    jobs = pack(0, servers, 2 * servers, listing.next_id)
    listing.add(jobs)
    mark_used(jobs)
    applied, _, _ = apply(hpc, listing.snapshot())
    say(f"  {servers:,} servers, their nodes and {len(jobs):,} jobs ({applied:.1f} s to apply)")
    others = [
        Cluster.objects.create(name=f"cluster-{c:02d}", kind="slurm") for c in range(CLUSTERS)
    ]
    bulk_nodes(others, max(0, nodes - servers), prefix="node")  # bench/nodes_list.py's
    node_findings(Node.objects.order_by("pk").values_list("pk", flat=True)[::50])
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            # Every table, as the steady state finds them: a node-set apply vacuums only the
            # nodes (core/db/statistics.py); autovacuum, in its time, the rest.
            cursor.execute("VACUUM (ANALYZE)")
    wide = max(listing.jobs.values(), key=lambda j: len(j.nodes))
    holder = Server.objects.get(hostname=node_name(wide.nodes[0])).pk
    return {"seconds": time.perf_counter() - start, "holder": holder}


def page_ids(response) -> list[int]:
    """The ids of the rows a list answer shows: the API's `results`, a page's `page`."""
    if response.get("Content-Type", "").startswith("application/json"):
        return [row["id"] for row in json.loads(response.content)["results"]]
    context = response.context
    rows = context["page"].object_list if context and "page" in context else []
    return [_pk(row) for row in rows]


def _pk(row: Any) -> int:
    if isinstance(row, dict):
        return row.get("pk", row.get("id"))
    return row.pk


def last_page(response) -> int:
    if response.get("Content-Type", "").startswith("application/json"):
        body = json.loads(response.content)
        size = max(1, len(body["results"]))
        return max(1, -(-body["count"] // size))
    return response.context["page"].paginator.num_pages


def measure(client, url: str, repeat: int) -> tuple[float, int, Any, float]:
    """Median seconds of `repeat` requests, the query count of one, one answer, and the
    seconds its queries took (the database's share: the rest is Python, on a shared machine
    the part that other work slows most)."""
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    def get() -> Any:
        response = client.get(url, HTTP_HOST="127.0.0.1")
        assert response.status_code == 200, (url, response.status_code, response.content[:300])
        return response

    get()
    reset_queries()
    with CaptureQueriesContext(connection) as captured:
        response = get()
    sql = sum(float(q["time"]) for q in captured.captured_queries)
    return median(timed(get, repeat)), len(captured.captured_queries), response, sql


def floor(table: str, ids: Iterable[int], repeat: int) -> float:
    """The page's rows read by one indexed query, by hand on a cursor."""
    from django.db import connection

    wanted = list(ids)

    def run() -> None:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(f"SELECT * FROM {table} WHERE id = ANY(%s)", [wanted])
            else:
                marks = ",".join("%s" for _ in wanted) or "NULL"
                cursor.execute(f"SELECT * FROM {table} WHERE id IN ({marks})", wanted)
            cursor.fetchall()

    return median(timed(run, repeat))


GOAL_S = 0.2


def report(
    label: str,
    url: str,
    seconds: float,
    queries: int,
    base: float,
    first: int | None = None,
    sql: float = 0.0,
) -> dict[str, Any]:
    """One line: the median, the query count, the floor and the ratio; marked where the page
    misses the goal or (a last page, given its `first` page's count) costs more queries."""
    ratio = seconds / base if base else 0.0
    goal = "" if seconds <= GOAL_S else f"  MISSES {GOAL_S * 1000:.0f} ms"
    if first is not None and queries != first:
        goal += f"  QUERIES {first} -> {queries}"
    say(
        f"  {label:<28}{seconds * 1000:>8.1f} ms{queries:>4} q (sql {sql * 1000:5.1f} ms)"
        f"   floor {base * 1000:6.1f} ms  {ratio:6.1f}x{goal}   {url}"
    )
    return {"seconds": seconds, "queries": queries, "floor": base, "sql": sql}


def run(nodes: int, servers: int, repeat: int = 5) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    logging.getLogger("workloads").setLevel(logging.ERROR)
    say(f"lists bench: {nodes:,} nodes on {connection.vendor}; load {machine_load()}")
    loaded = load(nodes, servers)
    took = loaded["seconds"]
    say(f"  loaded (PostgreSQL: VACUUM ANALYZEd) in {took:.1f} s; load {machine_load()}")
    user = get_user_model().objects.create_user("bench", password="bench-password-1")
    from core.db.bounds import enable_for_web

    enable_for_web()  # as config/wsgi.py: the statement timeout and no JIT, on a new connection
    connection.close()
    client = Client()
    client.force_login(user)
    figures: dict[str, Any] = {}
    say(
        f"  {'list, page':<28}{'median':>11}{'q':>4} {'(its SQL)':>15}   {'floor, rows by id':>17}"
        f"  ratio"
        f"   goal: under {GOAL_S * 1000:.0f} ms, the last page's queries the first's"
    )
    for base_url, table in {**API, **PAGES}.items():
        seconds, queries, response, sql = measure(client, base_url, repeat)
        base = floor(table, page_ids(response), repeat)
        figures[f"{base_url} first"] = report(
            f"{base_url} first", base_url, seconds, queries, base, sql=sql
        )
        url = f"{base_url}?page={last_page(response)}"
        first = queries
        seconds, queries, response, sql = measure(client, url, repeat)
        base = floor(table, page_ids(response), repeat)
        figures[f"{base_url} last"] = report(
            f"{base_url} last", url, seconds, queries, base, first=first, sql=sql
        )
    url = f"/servers/{loaded['holder']}/"
    seconds, queries, _, sql = measure(client, url, repeat)
    figures["server page"] = report(
        "server page (4 x 8 job)",
        url,
        seconds,
        queries,
        floor("inventory_server", [loaded["holder"]], repeat),
        sql=sql,
    )
    say(f"  load {machine_load()}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=130_000)
    parser.add_argument("--servers", type=int, default=25_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    setup()
    with bench_database():
        run(args.nodes, min(args.servers, args.nodes), args.repeat)


if __name__ == "__main__":
    main()
