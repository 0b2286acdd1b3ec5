"""Benchmark: `GET /api/v1/nodes/` at 130,000 nodes, beside the same SELECT by hand.

A fresh database holds N nodes (default 130,000) in 13 clusters, bulk-loaded and then
ANALYZEd the way a snapshot apply now does (core/db/statistics.py), a tenth of them bound to
servers and some with open findings. Printed for each page, median of `--repeat` requests
through Django's test client (authentication, filters, pagination, serializer, JSON):

- the first page (the default order: cluster name, then node name);
- a filtered page (`?cluster=...&state=idle`);
- a deep page (`?page=` near the end: OFFSET over almost every row);

each with its query count and, beside it, the floor measured in the same run: the page's own
SELECT (the one the ORM sent, by hand on a cursor), and the page's COUNT(*). Goal: the first
and filtered pages within a few times the floor and under 200 ms, a fixed query count, and
every page far inside ATLAS_DB_STATEMENT_TIMEOUT_MS.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/atlas .venv/bin/python bench/nodes_list.py
    .venv/bin/python bench/nodes_list.py --nodes 2000        # SQLite, quick

Figures only: nothing exits non-zero on a missed goal (as the other benchmarks).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable
from typing import Any

from _django import bench_database, machine_load, median, say, setup, timed

CLUSTERS = 13
BATCH = 5000


def bulk_nodes(
    clusters: list[Any], count: int, *, prefix: str = "gpu", servers: list[int] | None = None
) -> None:
    """`count` Slurm nodes named `<prefix>-000000` .. spread over `clusters` in turn, their
    states cycling through idle, allocated, mixed and down, 8 GPUs each; every tenth bound to
    the next of `servers` (ids) while they last. Straight into the table with bulk_create, in
    batches of BATCH (no statistics: the caller refreshes them)."""
    from django.utils import timezone

    from clusters.models import Node

    now = timezone.now()
    servers = servers or []
    states = ("idle", "allocated", "mixed", "down")
    rows: list[Node] = []
    for i in range(count):
        rows.append(
            Node(
                cluster=clusters[i % len(clusters)],
                name=f"{prefix}-{i:06d}",
                kind="slurm",
                state=states[i % len(states)],
                gpu_capacity=8,
                gpu_allocatable=8,
                server_id=servers[i // 10] if i % 10 == 0 and i // 10 < len(servers) else None,
                first_seen=now,
                last_seen=now,
            )
        )
        if len(rows) == BATCH:
            Node.objects.bulk_create(rows)
            rows = []
    Node.objects.bulk_create(rows)


def node_findings(node_ids: Iterable[int]) -> int:
    """An open `node_unavailable` warning on each of those nodes; how many were written."""
    from findings.models import Finding

    rows = [
        Finding(
            type="node_unavailable",
            severity="warning",
            node_id=pk,
            subject=f"node:bench/{pk}",
            message="down",
        )
        for pk in node_ids
    ]
    Finding.objects.bulk_create(rows, batch_size=BATCH)
    return len(rows)


def load(nodes: int) -> dict[str, Any]:
    """N nodes over CLUSTERS clusters, a tenth bound to servers, some with open findings."""
    from django.db import transaction

    from clusters.models import Cluster, Node
    from core.db.statistics import analyze_after_commit
    from findings.models import Finding
    from inventory.models import Server

    start = time.perf_counter()
    with transaction.atomic():
        clusters = [
            Cluster.objects.create(name=f"cluster-{c:02d}", kind="slurm") for c in range(CLUSTERS)
        ]
        Server.objects.bulk_create(
            [
                Server(identity=f"hostname:srv-{i:06d}", hostname=f"srv-{i:06d}")
                for i in range(nodes // 10)
            ],
            batch_size=BATCH,
        )
        servers = list(Server.objects.order_by("pk").values_list("pk", flat=True))
        bulk_nodes(clusters, nodes, servers=servers)
        some = Node.objects.order_by("pk").values_list("pk", flat=True)[: max(1, nodes // 100)]
        found = node_findings(some)
        analyze_after_commit(Node, changed=nodes, total=0)
        analyze_after_commit(Finding, changed=found, total=0)
    return {"seconds": time.perf_counter() - start, "cluster": clusters[3].name}


def measure(client, url: str, repeat: int) -> tuple[float, int, list[tuple[str, Any]]]:
    """Median seconds, query count, and the queries (SQL, params) of one request."""
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    reset_queries()  # the request resets the log: start from empty, as bench/pages.py does
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code, response.content[:300])
    seconds = median(timed(lambda: client.get(url), repeat))
    return (
        seconds,
        len(captured.captured_queries),
        [(q["sql"], None) for q in captured.captured_queries],
    )


def floor(queries: list[tuple[str, Any]], repeat: int) -> float:
    """The request's node queries (the page's SELECT and its COUNT) sent by hand, in seconds."""
    from django.db import connection

    node_sql = [sql for sql, _ in queries if "clusters_node" in sql]

    def run() -> None:
        with connection.cursor() as cursor:
            for sql in node_sql:
                cursor.execute(sql)  # as logged: parameters already inlined
                cursor.fetchall()

    return median(timed(run, repeat))


def run(nodes: int, repeat: int = 5) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    say(f"nodes list bench: {nodes} nodes on {connection.vendor}; load {machine_load()}")
    loaded = load(nodes)
    say(f"bulk load and ANALYZE: {loaded['seconds']:.1f} s")
    user = get_user_model().objects.create_user("bench", password="bench-password-1")
    client = Client()
    client.force_login(user)
    last_page = max(1, (nodes + 99) // 100)
    pages = {
        "first page": "/api/v1/nodes/",
        "filtered page": f"/api/v1/nodes/?cluster={loaded['cluster']}&state=idle",
        "deep page": f"/api/v1/nodes/?page={max(1, last_page - 1)}",
    }
    figures: dict[str, Any] = {"nodes": nodes, "load_s": loaded["seconds"]}
    for label, url in pages.items():
        seconds, count, queries = measure(client, url, repeat)
        base = floor(queries, repeat)
        figures[label] = {"seconds": seconds, "queries": count, "floor": base}
        say(
            f"{label:14} {seconds * 1000:8.1f} ms, {count} queries; "
            f"floor (its node SELECT and COUNT by hand) {base * 1000:7.1f} ms, "
            f"{seconds / base if base else 0:.1f}x   {url}"
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=130_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    setup()
    with bench_database():
        run(args.nodes, args.repeat)


if __name__ == "__main__":
    main()
