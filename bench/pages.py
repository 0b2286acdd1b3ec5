"""Benchmark: dashboard pages and fleet-figure rendering at 100 / 5,000 / 25,000 servers;
with `--nodes N`, every list's first and last page at N scheduler nodes (issue 27).

Each size runs in a fresh database (8 GPUs a server, a Kubernetes and a Slurm node per
server, bound by reconciliation). Printed per page: median server time of 5 requests and the
query count (which must not grow with the fleet), and the time the render task takes for
the fleet figures with their mark counts.

    .venv/bin/python bench/pages.py                 # 100, 5000, 25000 on SQLite
    DATABASE_URL=postgres://... .venv/bin/python bench/pages.py 100 5000
    DATABASE_URL=postgres://... .venv/bin/python bench/pages.py --nodes 130000

The `--nodes` mode is `bench/lists.py` (its docstring says what it loads and measures).
"""

from __future__ import annotations

import json
import sys
import time

from _django import each_size_in_a_fresh_process, median, setup, timed

SIZES = [int(a) for a in sys.argv[1:] if a.isdigit()] or [100, 5000, 25000]
PAGES = ["/", "/servers/", "/nodes/", "/gpus/", "/findings/", "/topology/", "/servers/1/"]


def marks(figure: dict) -> int:
    """Points, sectors or links a figure draws: what the browser has to lay out."""
    total = 0
    for trace in figure.get("data", []):
        for key in ("labels", "x", "z"):
            if isinstance(trace.get(key), list):
                total += len(trace[key])
                break
        link = trace.get("link") or {}
        total += len(link.get("source", []))
    return total


def run_one(n: int) -> None:
    setup()
    from _django import bench_database
    from django.contrib.auth import get_user_model
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from reconcile import build

    from clusters.reconcile import reconcile_all
    from topology.models import RenderedFigure
    from topology.render import fleet_render

    with bench_database() as (vendor, _):
        build(n)
        reconcile_all()
        user = get_user_model().objects.create_user("bench", password="bench-password-1")
        client = Client()
        client.force_login(user)
        print(f"\n{vendor}: {n:,} servers, {8 * n:,} GPUs, {2 * n:,} nodes")
        print(f"  {'page':<16}{'median':>10}{'queries':>9}{'bytes':>10}")
        for page in PAGES:

            def get(page=page):
                response = client.get(page, HTTP_HOST="127.0.0.1")
                assert response.status_code == 200, (page, response.status_code)
                return response

            get()
            seconds = median(timed(get, 5))
            reset_queries()
            with CaptureQueriesContext(connection) as ctx:
                size = len(get().content)
            print(f"  {page:<16}{seconds * 1000:>8.1f}ms{len(ctx.captured_queries):>9}{size:>10,}")
        start = time.perf_counter()
        rendered = fleet_render(force=True)
        took = time.perf_counter() - start
        print(f"  fleet figures rendered by the task in {took:.2f} s:")
        for figure in RenderedFigure.objects.filter(name__in=rendered):
            encoded = len(json.dumps(figure.figure))
            print(
                f"    {figure.name:<18}{figure.duration_ms:>7} ms{marks(figure.figure):>8} marks"
                f"{encoded:>11,} bytes"
            )


def main() -> None:
    if "--nodes" in sys.argv:
        from lists import main as lists_main

        lists_main()
        return
    each_size_in_a_fresh_process("pages.py", SIZES, run_one)


if __name__ == "__main__":
    main()
