"""Shared set-up for benchmarks: Django on a throw-away database of the configured engine.

`DATABASE_URL` picks the engine (SQLite by default); the benchmark creates its own test
database (`test_...`) and drops it afterwards, so it never touches real data.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("ATLAS_LOG_LEVEL", "WARNING")
    import django

    django.setup()


@contextmanager
def bench_database():
    """A migrated, empty database for the run; dropped at the end."""
    from django.db import connection
    from django.test.utils import setup_test_environment, teardown_test_environment

    setup_test_environment()
    name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        yield connection.vendor, name
    finally:
        connection.creation.destroy_test_db(name, verbosity=0)
        teardown_test_environment()


def machine_load() -> str:
    """The machine's 1, 5 and 15 minute load averages and its CPUs: figures on a shared
    machine are read beside them."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} {five:.1f} {fifteen:.1f} on {os.cpu_count()} CPUs"


def say(line: str) -> None:
    """Print a figure at once: a run cut short still tells what it had."""
    print(line, flush=True)


def timed(fn, repeat: int) -> list[float]:
    """Seconds per call, `repeat` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def postgres_url() -> str | None:
    """The PostgreSQL to also run on: BENCH_POSTGRES_URL, or the local one if it answers."""
    url = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/cluster_atlas")
    try:
        import psycopg

        with psycopg.connect(url.replace("/cluster_atlas", "/postgres"), connect_timeout=2):
            return url
    except Exception:
        return None


def each_size_in_a_fresh_process(script: str, sizes: list[int], run_one) -> None:
    """`script --one N` runs one size; without it, every size in its own process and database."""
    import subprocess

    if "--one" in sys.argv:
        run_one(sizes[0])
        return
    for n in sizes:
        subprocess.run([sys.executable, str(ROOT / "bench" / script), "--one", str(n)], check=True)
