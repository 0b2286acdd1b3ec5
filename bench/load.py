"""Benchmark: the fleet heartbeating through the production shape, started by this script.

Real gunicorn (the app, DJANGO_DEBUG=0), PostgreSQL (its own database on the configured
server, created and dropped here), a private redis-server and one Celery worker. N servers
(8-GPU reports of the agent's H100 profile, identities varied) get tokens and their first
report applied; then keep-alive clients (threads with http.client) post heartbeats for a
fixed time:

- heartbeat by digest: `X-Atlas-Report-Digest` and an empty body (what the agent sends now);
- heartbeat (full report): the unchanged report in full (what older agents send);

each beside its floor, a bare WSGI app (bench/floor_wsgi.py) behind the same gunicorn shape
that does the least any implementation must, in one statement: look the token's server up
by its key's digest and touch it (by digest), or parse, hash and upsert (full report). The
product and the floor run at once and are measured in alternating windows (`--rounds`), so
the machine's other load falls on both. Each prints heartbeats/s sustained, p50/p99
latency, errors, the ratio to its floor round by round and pooled, and the goals (issue 27):
by digest within 1.2x of its floor and >= 2,500/s, full reports within 1.5x, p99 <= 50 ms,
0 errors. Above them, the ceiling: the floor's gunicorn answering a constant without reading
anything, what this shape and these clients (on the same machine) can do at all. Then a
burst: B more servers report for the first time, and then all change at once (a driver
upgrade across the fleet): the time until every report is applied (polling the database),
and that none is lost.

Sizing the Celery worker (`--drain C1xP1,C2xP2`): for each worker shape (concurrency x
prefetch multiplier) in turn, D servers' changed reports are posted while no worker runs (they
wait in Redis, as after a fleet-wide upgrade), then a worker of that shape is started and
timed from its first applied report to its last: applies/s of the worker alone, same run,
nothing else competing. `--pg-set synchronous_commit=off` sets a PostgreSQL parameter on the
benchmark's own database (every connection of the run), to compare settings run against run.

    .venv/bin/python bench/load.py                           # 300 servers, 16 clients, 3x10 s
    .venv/bin/python bench/load.py --servers 1000 --burst 2000 --duration 20
    .venv/bin/python bench/load.py --shapes sync:2,sync:4,gthread:2x4 --burst 0   # sizing
    .venv/bin/python bench/load.py --servers 16 --duration 0 --burst 0 --drain 1x1,2x1,4x1

Shapes: `sync:W` (W sync workers) or `gthread:WxT` (W workers of T threads). The machine's
other load is printed with the figures (`os.getloadavg`): on a shared machine run it twice.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
REPORTS = "/api/v1/reports/"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{what} did not listen on {port} within {timeout:.0f} s")


@contextmanager
def process(args: list[str], *, env: dict, what: str, log: Path, port: int | None = None):
    """A child process in its own group, stopped by its pid (TERM, then KILL to the group)."""
    with open(log, "ab") as out:
        child = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=out, stderr=out, start_new_session=True
        )
    try:
        if port is not None:
            wait_for_port(port, child, what)
        yield child
    finally:
        # TERM to the leader alone: gunicorn's master and Celery's main process stop their own
        # workers (a TERM to the whole group kills Celery's pool under it: WorkerLostError).
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                child.wait(15)
        with suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # whatever of the group is left
        child.wait(5)


@contextmanager
def database(admin_url: str, name: str, settings: list[str] = ()):
    """A fresh PostgreSQL database for the run, with `name=value` parameters set on it (for
    every connection to it, not the server's others); dropped afterwards."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
        for setting in settings:
            key, _, value = setting.partition("=")
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                    sql.Identifier(name), sql.Identifier(key.strip()), sql.Literal(value.strip())
                )
            )
    try:
        yield re.sub(r"/[^/]*$", f"/{name}", admin_url)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Fleet:
    """Reports of an 8-GPU server, one per identity, cut from one simulated report (the
    agent's H100 profile: 8 GPUs, 8 NICs, 136 links): hostnames, UUIDs, serials and MACs are
    replaced, so every server is its own with its own GPUs."""

    def __init__(self) -> None:
        from simulator.fleet import fleet

        self.template = fleet({"h100": 1}, seed="load")[0].report()
        text = json.dumps(self.template)
        host = self.template["host"]
        self.names = [host["hostname"], host["system_uuid"], host["machine_id"], host["serial"]]
        self.names += [g["uuid"] for g in self.template["gpus"]]
        self.names += [g["serial"] for g in self.template["gpus"] if g.get("serial")]
        self.names += [n["mac"] for n in self.template["nics"] if n.get("mac")]
        self.names = [n for n in self.names if n and n in text]
        self.text = text

    def report(self, prefix: str, i: int, driver: str | None = None) -> dict:
        text = self.text
        seed = uuid.uuid5(uuid.NAMESPACE_DNS, f"{prefix}-{i}")
        for n, old in enumerate(self.names):
            new = uuid.uuid5(seed, str(n)).hex
            if n == 0:
                new = f"{prefix}-{i:05d}"
            elif re.fullmatch(r"GPU-[0-9a-f-]{36}", old) or re.fullmatch(r"[0-9a-f-]{36}", old):
                new = (old[:4] if old.startswith("GPU-") else "") + str(uuid.UUID(new))
            elif re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", old):
                new = ":".join(new[k : k + 2] for k in range(0, 12, 2))
            elif old.isdigit():
                new = str(int(new[:12], 16) % 10 ** len(old)).zfill(len(old))
            else:
                new = new[: len(old)]
            text = text.replace(old, new)
        report = json.loads(text)
        if driver:
            report["driver"]["driver_version"] = driver
        return report


class Load:
    """Clients posting jobs round-robin for a time; latencies and errors collected."""

    def __init__(self, port: int, clients: int) -> None:
        self.port = port
        self.clients = clients

    def run(self, jobs: list, duration: float | None = None) -> dict:
        """jobs: (body, headers, expected status, expected bytes in the answer or None).
        With a duration, round-robin until it ends; without, each job once."""
        counter = itertools.count()
        lock = threading.Lock()
        latencies: list[float] = []
        errors: list[str] = []
        start = time.perf_counter()
        stop_at = start + duration if duration else None

        def client() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            mine: list[float] = []
            wrong: list[str] = []
            while True:
                n = next(counter)
                if stop_at is None and n >= len(jobs):
                    break
                if stop_at is not None and time.perf_counter() >= stop_at:
                    break
                body, headers, expected, marker = jobs[n % len(jobs)]
                began = time.perf_counter()
                try:
                    conn.request("POST", REPORTS, body=body, headers=headers)
                    response = conn.getresponse()
                    answer = response.read()
                    if response.status != expected or (marker and marker not in answer):
                        wrong.append(f"{response.status} {answer[:200]!r}")
                except (OSError, http.client.HTTPException) as exc:
                    wrong.append(f"{type(exc).__name__}: {exc}")
                    conn.close()
                mine.append(time.perf_counter() - began)
            conn.close()
            with lock:
                latencies.extend(mine)
                errors.extend(wrong)

        threads = [threading.Thread(target=client) for _ in range(self.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
        latencies.sort()

        return {
            "n": len(latencies),
            "rate": len(latencies) / elapsed,
            "p50": percentile(latencies, 0.50),
            "p99": percentile(latencies, 0.99),
            "errors": errors,
            "elapsed": elapsed,
            "latencies": latencies,
        }


def gunicorn_args(shape: str, port: int, app: str) -> list[str]:
    kind, _, size = shape.partition(":")
    args = [str(BIN / "gunicorn"), app, "--bind", f"127.0.0.1:{port}", "--backlog", "2048"]
    if kind == "sync":
        args += ["--workers", size or "2", "--worker-class", "sync"]
    elif kind == "gthread":
        workers, _, threads = (size or "2x4").partition("x")
        args += ["--workers", workers, "--worker-class", "gthread", "--threads", threads or "4"]
        args += ["--keep-alive", "5"]
    else:
        raise SystemExit(f"unknown shape {shape!r}: sync:W or gthread:WxT")
    return args


def poll(sql: str, params: tuple, target: int, url: str, timeout: float) -> tuple[int, float]:
    """Wait until `sql` counts `target` rows; (the count reached, seconds waited)."""
    import psycopg

    start = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            count = conn.execute(sql, params).fetchone()[0]
            waited = time.perf_counter() - start
            if count >= target or waited > timeout:
                return count, waited
            time.sleep(0.25)


def line(label: str, result: dict, floor: dict | None) -> str:
    ratio = f"{floor['rate'] / result['rate']:.2f}x" if floor and result["rate"] else "-"
    return (
        f"  {label:<40}{result['rate']:>9.0f}/s{result['p50']:>9.1f}{result['p99']:>9.1f}"
        f"{len(result['errors']):>8}{ratio:>10}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", type=int, default=300)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per window")
    parser.add_argument("--rounds", type=int, default=3, help="windows per path and floor; 0: none")
    parser.add_argument("--shapes", default="gthread:2x4", help="comma-separated, see above")
    parser.add_argument("--burst", type=int, default=2000, help="servers in the burst; 0: none")
    parser.add_argument("--celery-concurrency", type=int, default=2)
    parser.add_argument("--celery-prefetch", type=int, default=1, help="prefetch multiplier")
    parser.add_argument(
        "--drain", default="", help="worker shapes CxP (concurrency x prefetch) to compare"
    )
    parser.add_argument("--drain-reports", type=int, default=300, help="reports per shape")
    parser.add_argument(
        "--pg-set", action="append", default=[], help="name=value on the run's database"
    )
    parser.add_argument("--health-checks", default="1", help="DATABASE_CONN_HEALTH_CHECKS")
    parser.add_argument("--conn-max-age", default="60", help="DATABASE_CONN_MAX_AGE")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL URL that may create databases",
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="atlas-load-"))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, work, True)
        db_url = stack.enter_context(
            database(args.postgres, f"atlas_load_{os.getpid()}", args.pg_set)
        )
        redis_port = free_port()
        env = {
            **os.environ,
            "DATABASE_URL": db_url,
            "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
            "DJANGO_DEBUG": "0",
            "DJANGO_SECRET_KEY": "load-bench-" + uuid.uuid4().hex,
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DATABASE_CONN_MAX_AGE": args.conn_max_age,
            "DATABASE_CONN_HEALTH_CHECKS": args.health_checks,
            "ATLAS_LOG_LEVEL": "WARNING",
            "ATLAS_VAR_DIR": str(work / "var"),
            "C_FORCE_ROOT": "1",
            "FLOOR_DATABASE_URL": db_url,
            "PYTHONPATH": str(ROOT),
        }
        env.pop("CELERY_BROKER_URL", None)
        os.environ.update({k: env[k] for k in ("DATABASE_URL", "DJANGO_SECRET_KEY")})
        os.environ["ATLAS_LOG_LEVEL"] = "WARNING"
        sys.path.insert(0, str(ROOT))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        import django

        django.setup()
        from django.core.management import call_command

        from agent.schema import report_digest
        from inventory.services import agent_token_create

        started = time.perf_counter()
        call_command("migrate", verbosity=0)
        print(
            f"database {db_url.rsplit('/', 1)[1]} migrated in {time.perf_counter() - started:.0f} s"
        )

        stack.enter_context(
            process(
                [shutil.which("redis-server") or "redis-server", "--port", str(redis_port),
                 "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                env=env, what="redis-server", log=work / "redis.log", port=redis_port,
            )
        )  # fmt: skip
        worker_log = work / "celery.log"
        worker = stack.enter_context(ExitStack())  # closed early by --drain
        worker.enter_context(
            celery_worker(args.celery_concurrency, args.celery_prefetch, env, work, worker_log)
        )

        fleet = Fleet()

        def register(prefix: str, count: int, driver: str | None = None):
            keys = [agent_token_create(name=f"{prefix}-{i}")[1] for i in range(count)]
            reports = [fleet.report(prefix, i, driver) for i in range(count)]
            return keys, reports

        def full_jobs(keys, reports, expected=202, marker=None):
            return [
                (
                    json.dumps(report, separators=(",", ":")).encode(),
                    {"Authorization": f"Token {key}", "Content-Type": "application/json"},
                    expected,
                    marker,
                )
                for key, report in zip(keys, reports, strict=True)
            ]

        def applied(prefix: str, driver: str | None, count: int, timeout: float):
            sql = (
                "SELECT count(*) FROM inventory_server "
                "WHERE hostname LIKE %s AND last_report_hash <> ''"
            )
            params: tuple = (f"{prefix}-%",)
            if driver:
                sql += " AND driver_version = %s"
                params += (driver,)
            return poll(sql, params, count, db_url, timeout)

        keys, reports = register("load", args.servers)
        shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
        app_port = free_port()
        with process(
            gunicorn_args(shapes[0], app_port, "config.wsgi"),
            env=env, what="gunicorn", log=work / "gunicorn.log", port=app_port,
        ):  # fmt: skip
            first = Load(app_port, args.clients).run(full_jobs(keys, reports, 202, b"pending"))
            count, waited = applied("load", None, args.servers, 600)
        print(
            f"{args.servers} servers registered: first reports {first['rate']:.0f}/s "
            f"({len(first['errors'])} errors), all applied {waited:.1f} s after the last "
            f"({count}/{args.servers})"
        )
        if first["errors"]:
            print("  first errors:", first["errors"][:3])

        heartbeat = full_jobs(keys, reports, 202, b'"unchanged"')
        by_digest = [
            (
                b"",
                {
                    "Authorization": f"Token {key}",
                    "Content-Type": "application/json",
                    "X-Atlas-Report-Digest": f"sha256:{report_digest(report)}",
                },
                200,
                b'"unchanged"',
            )
            for key, report in zip(keys, reports, strict=True)
        ]
        print(
            f"\n{args.clients} keep-alive clients, {args.rounds} rounds of {args.duration:.0f} s "
            f"windows alternating each path with its floor, 8-GPU reports of "
            f"{len(heartbeat[0][0]):,} bytes; CONN_MAX_AGE={args.conn_max_age}, "
            f"health checks {args.health_checks}; Celery worker concurrency "
            f"{args.celery_concurrency}, prefetch {args.celery_prefetch}; PostgreSQL "
            f"{', '.join(args.pg_set) or 'defaults'}"
        )
        for shape in shapes if args.duration and args.rounds else ():
            measure(args, env, work, shape, {"by digest": by_digest, "full report": heartbeat})

        if args.burst:
            burst(args, env, work, shapes[0], register, full_jobs, applied)
        if args.drain:
            worker.close()
            drain(args, env, work, shapes[0], register, full_jobs, applied, worker_log)
        logged = worker_log.read_text("utf-8", "replace") if worker_log.exists() else ""
        if "Traceback" in logged:
            first = logged[logged.index("Traceback") :][:1500]
            print(f"\nthe Celery worker logged tracebacks; the first:\n{first}")


# (label, the product's jobs key, goal: the most time per heartbeat relative to its floor)
PATHS = (("heartbeat by digest", "by digest", 1.2), ("heartbeat (full report)", "full report", 1.5))
GOAL_RATE = 2500  # heartbeats by digest per second (75,000 servers at 30 s)
GOAL_P99_MS = 50.0


def measure(args, env: dict, work: Path, shape: str, jobs: dict) -> None:
    """Each product path beside its floor, in windows that alternate (floor, product, floor,
    product, ... for `--rounds`), so a change in the machine's other load falls on both;
    the product app and the floor app run at once behind gunicorns of the same shape."""
    print(f"\nshape {shape} (load average before: {os.getloadavg()[0]:.2f})")
    with ExitStack() as stack:
        ports = {}
        for name, app in (("product", "config.wsgi"), ("floor", "floor_wsgi:application")):
            port = free_port()
            argv = gunicorn_args(shape, port, app)
            if name == "floor":
                argv += ["--chdir", str(ROOT / "bench")]
            log = work / f"gunicorn-{name}.log"
            stack.enter_context(process(argv, env=env, what=f"gunicorn {name}", log=log, port=port))
            ports[name] = port
        windows: dict[tuple[str, str], list[dict]] = {}
        ceiling_jobs = [
            (body, {**headers, "X-Bench-Ceiling": "1"}, 200, None)
            for body, headers, _status, _marker in jobs["by digest"]
        ]
        for _ in range(args.rounds):
            loader = Load(ports["floor"], args.clients)
            windows.setdefault(("ceiling", "floor"), []).append(
                loader.run(ceiling_jobs, args.duration)
            )
            for _label, key, _goal in PATHS:
                for name in ("floor", "product"):
                    loader = Load(ports[name], args.clients)
                    loader.run(jobs[key][: args.clients * 2])  # every thread's connection warm
                    windows.setdefault((key, name), []).append(loader.run(jobs[key], args.duration))
        product_end = time.time()  # each round ends with a product window
        freshness = seen_after_flush(env, product_end)
    print(f"  {'path':<40}{'rate':>11}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'vs floor':>10}")
    ceiling = pooled(windows["ceiling", "floor"])
    print(line("ceiling: a constant answer (no database)", ceiling, None))
    verdicts = []
    for label, key, goal in PATHS:
        floor, got = (pooled(windows[key, name]) for name in ("floor", "product"))
        print(line(f"floor for {key} (bare WSGI app)", floor, None))
        print(line(label, got, floor))
        rounds = ", ".join(
            f"{f['rate'] / p['rate']:.2f}x" if p["rate"] else "-"
            for f, p in zip(windows[key, "floor"], windows[key, "product"], strict=True)
        )
        print(f"    vs floor, round by round: {rounds}")
        for result in (floor, got):
            if result["errors"]:
                print("    first errors:", result["errors"][:3])
        ratio = floor["rate"] / got["rate"] if got["rate"] else float("inf")
        met = ratio <= goal and not got["errors"] and got["p99"] <= GOAL_P99_MS
        if key == "by digest":
            met = met and got["rate"] >= GOAL_RATE
            goals = f"within {goal}x, >= {GOAL_RATE:,}/s, p99 <= {GOAL_P99_MS:.0f} ms, 0 errors"
        else:
            goals = f"within {goal}x, p99 <= {GOAL_P99_MS:.0f} ms, 0 errors"
        verdicts.append(f"{label} ({goals}): {'met' if met else 'MISSED'}")
    for verdict in verdicts:
        print(f"  goal, {verdict}")
    print(f"  {freshness}")
    print(f"  load average after: {os.getloadavg()[0]:.2f}")


def seen_after_flush(env: dict, product_end: float) -> str:
    """The product writes last_seen in bulk (inventory/services/heartbeat.py): one flush
    interval after its last window, every server's last_seen is the time of its last
    heartbeat in that window; how far the oldest is from the window's end says so."""
    import psycopg

    flush_s = float(env.get("ATLAS_HEARTBEAT_FLUSH_S") or 5)
    time.sleep(flush_s + 1)
    with psycopg.connect(env["DATABASE_URL"], autocommit=True) as conn:
        oldest = conn.execute(
            "SELECT min(extract(epoch FROM last_seen)) FROM inventory_server "
            "WHERE hostname LIKE 'load-%%'"
        ).fetchone()[0]
    behind = product_end - float(oldest)
    return (
        f"last_seen {flush_s + 1:.0f} s after the product's last window: the oldest server's "
        f"{behind:.1f} s before that window's end (flush every {flush_s:.0f} s)"
    )


def pooled(windows: list[dict]) -> dict:
    """Several windows of one path as one: requests over seconds, percentiles over all."""
    latencies = sorted(x for w in windows for x in w["latencies"])
    elapsed = sum(w["elapsed"] for w in windows)
    return {
        "n": len(latencies),
        "rate": len(latencies) / elapsed if elapsed else 0.0,
        "p50": percentile(latencies, 0.50),
        "p99": percentile(latencies, 0.99),
        "errors": [e for w in windows for e in w["errors"]],
        "elapsed": elapsed,
        "latencies": latencies,
    }


def percentile(latencies: list[float], q: float) -> float:
    """In ms, of sorted latencies in seconds; 0 for none."""
    return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else 0.0


def celery_worker(concurrency: int, prefetch: int, env: dict, work: Path, log: Path):
    """The worker as README's production shape starts it, of the given size."""
    return process(
        [str(BIN / "celery"), "-A", "config", "worker", "--loglevel", "WARNING",
         "--concurrency", str(concurrency), "--prefetch-multiplier", str(prefetch),
         "-O", "fair", "--without-gossip", "--without-mingle",
         "--pidfile", str(work / f"celery-{concurrency}x{prefetch}.pid")],
        env=env, what="celery worker", log=log,
    )  # fmt: skip


def drain(args, env, work, shape, register, full_jobs, applied, worker_log) -> None:
    """Each worker shape drains the same backlog: D changed reports queued while no worker
    ran; timed from its first applied report to its last (worker start-up left out)."""
    count = args.drain_reports
    keys, reports = register("drain", count)
    port = free_port()
    print(
        f"\nworker drain: {count} changed reports queued, then one worker "
        f"(concurrency x prefetch multiplier) applies them; shape {shape}"
    )
    print(f"  {'worker':<10}{'applied':>10}{'seconds':>10}{'reports/s':>11}{'load avg':>10}")
    with process(
        gunicorn_args(shape, port, "config.wsgi"),
        env=env, what="gunicorn", log=work / "gunicorn.log", port=port,
    ):  # fmt: skip
        rounds = [("first", None)] + [(s.strip(), s.strip()) for s in args.drain.split(",")]
        for n, (label, size) in enumerate(rounds):
            driver = f"{900 + n}.0.0"
            batch = [dict(r, driver={**r["driver"], "driver_version": driver}) for r in reports]
            posted = Load(port, args.clients).run(full_jobs(keys, batch, 202, b"pending"))
            if posted["errors"]:
                print("    post errors:", posted["errors"][:3])
            concurrency, _, prefetch = (size or f"{args.celery_concurrency}x1").partition("x")
            load = os.getloadavg()[0]
            with celery_worker(int(concurrency), int(prefetch or 1), env, work, worker_log):
                applied("drain", driver, 1, 120)  # the worker is up and applying
                done, seconds = applied("drain", driver, count, 1200)
            if size is None:
                continue  # the servers' first reports: not a comparison
            rate = (count - 1) / seconds if seconds > 0 else 0.0
            print(f"  {label:<10}{done:>10}{seconds:>10.1f}{rate:>11.1f}{load:>10.2f}")


def burst(args, env, work, shape, register, full_jobs, applied) -> None:
    """B new servers report at once, then all change at once: times, and nothing lost."""
    import psycopg

    count = args.burst
    keys, reports = register("burst", count)
    upgraded = [dict(r, driver={**r["driver"], "driver_version": "999.1.1"}) for r in reports]
    port = free_port()
    print(f"\nburst of {count} servers (shape {shape}, load average {os.getloadavg()[0]:.2f})")
    with process(
        gunicorn_args(shape, port, "config.wsgi"),
        env=env, what="gunicorn", log=work / "gunicorn.log", port=port,
    ):  # fmt: skip
        for label, batch, driver in (
            ("first reports (new servers)", reports, None),
            ("all changed at once (driver upgrade)", upgraded, "999.1.1"),
        ):
            started = time.perf_counter()
            posted = Load(port, args.clients).run(full_jobs(keys, batch, 202, b"pending"))
            done, _ = applied("burst", driver, count, 1200)
            total = time.perf_counter() - started
            print(
                f"  {label:<38} posted in {posted['elapsed']:.1f} s ({posted['rate']:.0f}/s, "
                f"p99 {posted['p99']:.0f} ms, {len(posted['errors'])} errors); all applied "
                f"{total:.1f} s after the first post ({count / total:.0f}/s): {done}/{count}"
            )
    with psycopg.connect(env["DATABASE_URL"], autocommit=True) as conn:
        rows = conn.execute(
            "SELECT r.status, count(*) FROM inventory_report r JOIN inventory_agenttoken t "
            "ON t.id = r.token_id WHERE t.name LIKE 'burst-%%' GROUP BY r.status"
        ).fetchall()
    statuses = dict(rows)
    lost = 2 * count - statuses.get("applied", 0)
    print(f"  reports by status: {statuses}; lost (not applied): {lost}")


if __name__ == "__main__":
    main()
