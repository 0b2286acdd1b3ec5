"""Benchmark: the 202 path of `POST /api/v1/reports/` while the broker is away.

Each report is stored, then handed to the broker after commit; with Redis away that hand-off
must not hold the agent's request (the beat sweep applies pending reports anyway). Three
brokers, every one on this machine's loopback:

- up: a private `redis-server` on a free port (the floor: p50 with the broker there);
- stopped: the same port after the server stopped (connections refused at once);
- black hole: a listening socket whose accept queue is full, so a connect gets no answer
  and waits for its timeout (a broker host that is down or firewalled).

Every report differs from the last (no heartbeat short-cut), on a throw-away database of the
configured engine; each broker starts with a fresh breaker, as a new web process would (its
first report pays the failed hand-off: the max column). Goal (issue 9): p50 with the broker
away within 2x the floor.

    .venv/bin/python bench/outage.py [--repeat N]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/x .venv/bin/python bench/outage.py
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager

from _django import setup


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def redis_server():
    """A private redis-server on a free port; yields (url, stop)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server not found (apt-get install redis-server)")
    port = free_port()
    folder = tempfile.mkdtemp(prefix="atlas-outage-")
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def stop() -> None:
        if process.poll() is None:
            process.terminate()
            process.wait(10)

    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise SystemExit("redis-server did not start")
        yield f"redis://127.0.0.1:{port}/0", stop
    finally:
        stop()
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def black_hole():
    """A loopback port that never completes a connect: its accept queue is kept full."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):  # fill the queue; once full the kernel drops further SYNs
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    time.sleep(0.2)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(repeat: int) -> None:
    setup()
    import logging

    logging.getLogger("inventory").setLevel(logging.ERROR)  # one warning per failed hand-off
    from _django import bench_database
    from django.test import Client

    from config.celery import app
    from inventory.services import agent_token_create
    from simulator.fleet import fleet

    def use_broker(url: str) -> None:
        """As a fresh web process would: no memory of an earlier broker's failures."""
        try:
            from inventory.tasks import broker
        except ImportError:  # before the breaker existed
            broker = None
        if broker is not None:
            broker.reset()
        app.conf.broker_url = url
        app.conf.task_always_eager = False
        app._pool = None  # connections and producers are cached per broker URL
        app.amqp._producer_pool = None

    with bench_database() as (vendor, _), redis_server() as (redis_url, stop_redis):
        client = Client()
        report = fleet({"h100": 1}, seed="outage")[0].report()
        _, key = agent_token_create(name="outage")
        counter = iter(range(10**9))

        def post() -> float:
            changed = copy.deepcopy(report)
            changed["gpus"][0]["ecc_errors_corrected"] = next(counter)
            body = json.dumps(changed).encode()
            start = time.perf_counter()
            response = client.post(
                "/api/v1/reports/",
                data=body,
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Token {key}",
            )
            elapsed = time.perf_counter() - start
            assert response.status_code == 202, response.content
            return elapsed

        rows = []
        use_broker(redis_url)
        post()  # warm: the first report creates the token binding
        rows.append(("up (floor)", [post() for _ in range(repeat)]))
        stop_redis()
        use_broker(redis_url)
        rows.append(("stopped (refused)", [post() for _ in range(repeat)]))
        with black_hole() as url:
            use_broker(url)
            rows.append(("black hole (connect timeout)", [post() for _ in range(repeat)]))

    floor = percentile(rows[0][1], 0.5)
    print(f"\n{vendor}: POST /api/v1/reports/ (a changed 8-GPU report), {repeat} posts per broker")
    print(f"  {'broker':<30}{'p50':>10}{'p90':>10}{'max':>10}{'p50/floor':>11}")
    for name, times in rows:
        p50, p90 = percentile(times, 0.5), percentile(times, 0.9)
        print(
            f"  {name:<30}{p50 * 1000:>8.1f}ms{p90 * 1000:>8.1f}ms{max(times) * 1000:>8.1f}ms"
            f"{p50 / floor:>11.2f}"
        )
    worst = max(percentile(times, 0.5) for _, times in rows[1:])
    verdict = "met" if worst <= 2 * floor else "MISSED"
    print(f"  goal p50 with the broker away <= 2x floor: {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    run(parser.parse_args().repeat)


if __name__ == "__main__":
    main()
