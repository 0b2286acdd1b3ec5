"""Benchmark: slow clients against gunicorn alone and behind the shipped nginx (issue 26 item 7).

gunicorn with the README's production flags (2 workers x 4 gthreads, --limit-request-line
8190) on a throw-away database of the configured engine, and nginx from
deploy/nginx/cluster-atlas-proxy.conf in front of it (tests/integration/proxy.py starts both).
For each way in, first the floor: H agents' digest heartbeats and a dashboard page sent at
once with no slow client. Then S slowloris connections (a request head a byte a second, never
finished) are opened, and the same requests are sent while they stay open, each given T
seconds. Printed per way in: answered, timed out, p50 and max of the answered, and how many
slow connections were still held when the requests were done.

    .venv/bin/python bench/slowloris.py [--slow 50] [--heartbeats 16] [--timeout 5]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/x .venv/bin/python bench/slowloris.py

Goal: behind the proxy, every heartbeat and page answers with the slow clients open, as on
the floor. gunicorn alone answers few or none once the slow clients outnumber its threads
(its two workers take the connections unevenly: one holding fewer slow clients than its
threads still answers what reaches it).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _django import bench_database, setup


def one(port: int, method: str, path: str, headers: dict[str, str], timeout: float):
    """(status or None for no answer in time, seconds)."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status, time.perf_counter() - started
    except OSError:
        return None, time.perf_counter() - started
    finally:
        conn.close()


def burst(port: int, heartbeat: dict, page: dict, count: int, timeout: float) -> list:
    calls = [("POST", "/api/v1/reports/", heartbeat)] * count + [("GET", "/servers/", page)]
    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(lambda c: one(port, *c, timeout), calls))


def line(label: str, results: list, held: str) -> str:
    answered = [s for status, s in results if status in (200, 202)]
    late = sum(1 for status, _ in results if status is None)
    p50 = f"{statistics.median(answered) * 1000:8.1f}" if answered else "       -"
    top = f"{max(answered) * 1000:8.1f}" if answered else "       -"
    return f"{label:<40} {len(answered):>3}/{len(results):<3} {late:>9} {p50} {top} {held:>6}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slow", type=int, default=50, help="slow connections")
    parser.add_argument("--heartbeats", type=int, default=16, help="heartbeats sent at once")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds each request gets")
    args = parser.parse_args()
    setup()
    from django.conf import settings
    from django.test import Client

    from agent.schema import DIGEST_HEADER, DIGEST_SCHEME, report_digest
    from inventory.services import agent_token_create
    from tests.integration import services
    from tests.integration.proxy import (
        Nginx,
        SlowClients,
        nginx_binary,
        start_gunicorn,
        wait_for_http,
    )
    from tests.reports import make_report

    binary = nginx_binary()
    if binary is None:
        sys.exit("nginx not found: apt-get install nginx")
    workdir = Path(tempfile.mkdtemp(prefix="atlas-slowloris-"))
    with bench_database() as (vendor, _name):
        from django.contrib.auth import get_user_model

        _token, key = agent_token_create(name="dgx-bench")
        report = make_report("dgx-bench")
        person = Client()
        person.force_login(get_user_model().objects.create_user("bench-reader"))
        page = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={person.cookies['sessionid'].value}"}
        env = {k: v for k, v in os.environ.items() if k not in ("CELERY_BROKER_URL", "REDIS_URL")}
        env.update(
            DATABASE_URL=services.test_database_url(),
            DJANGO_DEBUG="0",
            DJANGO_SECRET_KEY=settings.SECRET_KEY,
            DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
            ATLAS_LOG_LEVEL="ERROR",
        )
        port = services.free_port()
        gunicorn = start_gunicorn(port, env, workdir / "gunicorn.log", 2, 4)
        nginx = None
        try:
            if not wait_for_http(port, 60):
                sys.exit(f"gunicorn did not start:\n{gunicorn.output()}")
            nginx = Nginx(binary, workdir / "nginx", port)
            full = {"Authorization": f"Token {key}", "Content-Type": "application/json"}
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("POST", "/api/v1/reports/", body=json.dumps(report), headers=full)
            assert conn.getresponse().status == 202
            conn.close()
            heartbeat = {**full, DIGEST_HEADER: f"{DIGEST_SCHEME}{report_digest(report)}"}
            services.wait_until(
                lambda: one(port, "POST", "/api/v1/reports/", heartbeat, 10)[0] == 200, 60, 0.5
            )
            print(
                f"{vendor}; gunicorn 2 workers x 4 threads; {args.slow} slow connections; "
                f"{args.heartbeats} heartbeats + 1 page at once, {args.timeout:g} s each; "
                f"load {os.getloadavg()[0]:.2f}"
            )
            print(
                f"{'':<40} {'answered':<7} {'timed out':>9} {'p50 ms':>8} {'max ms':>8} {'held':>6}"
            )
            for label, target in (("nginx in front", nginx.port), ("gunicorn alone", port)):
                floor = burst(target, heartbeat, page, args.heartbeats, args.timeout)
                print(line(f"{label}: floor (no slow client)", floor, "-"))
                slow = SlowClients(target, args.slow, interval=1.0)
                try:
                    time.sleep(2)
                    results = burst(target, heartbeat, page, args.heartbeats, args.timeout)
                    held = str(slow.open_count())
                finally:
                    slow.close()
                print(line(f"{label}: {args.slow} slow clients", results, held))
                time.sleep(1)  # gunicorn's threads see the slow clients go
        finally:
            if nginx:
                nginx.stop()
            gunicorn.stop()
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
