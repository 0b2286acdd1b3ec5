"""Real services for the integration tier: Redis servers and Celery worker/beat processes.

Every wait is bounded and every process is stopped by its pid, so a broken service fails a
test instead of hanging the run.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.db import connection

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


def redis_ping(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5).ping())
    except Exception:
        return False


def test_database_url() -> str:
    """A DATABASE_URL for subprocesses that points at the test database of this run."""
    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    user = s.get("USER") or "postgres"
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    host, port = s.get("HOST") or "127.0.0.1", s.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{s['NAME']}"


class Process:
    """A subprocess with its output in a log file; stopped with TERM, then KILL."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._file = log.open("wb")
        self.popen = subprocess.Popen(
            args,
            cwd=REPO,
            env=env,
            stdout=self._file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, grace: float = 10) -> None:
        if self.alive():
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)
        self._file.close()


@contextmanager
def black_hole() -> Iterator[str]:
    """A redis:// URL on loopback whose connects never complete (the accept queue is kept
    full, so the kernel drops further SYNs): a broker host that is down or firewalled."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
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


class RedisServer:
    """A Redis of the test's own on a free port, to stop and start mid-test."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: Process | None = None

    def start(self) -> None:
        self.process = Process(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            env=dict(os.environ),
            log=self.workdir / f"redis-{self.port}.log",
        )
        if not wait_until(lambda: redis_ping(self.url), 10):
            raise RuntimeError(f"redis-server did not start:\n{self.process.output()}")

    def stop(self) -> None:
        if self.process:
            self.process.stop()
            wait_until(lambda: not redis_ping(self.url), 5)


def celery_env(broker_url: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        CELERY_BROKER_URL=broker_url,
        DATABASE_URL=test_database_url(),
        C_FORCE_ROOT="1",
        PYTHONUNBUFFERED="1",
        DJANGO_SETTINGS_MODULE="config.settings",
        **extra,
    )
    env.pop("REDIS_URL", None)
    return env


def start_worker(broker_url: str, workdir: Path, **extra_env: str) -> Process:
    worker = Process(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--pool=solo",
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            f"--pidfile={workdir / 'worker.pid'}",
            "-n",
            f"test-{os.getpid()}@%h",
        ],
        env=celery_env(broker_url, **extra_env),
        log=workdir / "worker.log",
    )
    if not wait_until(lambda: "ready." in worker.output() or not worker.alive(), 60, 0.2):
        worker.stop()
        raise RuntimeError(f"celery worker did not become ready:\n{worker.output()}")
    if not worker.alive():
        raise RuntimeError(f"celery worker died:\n{worker.output()}")
    return worker


def start_beat(broker_url: str, workdir: Path, **extra_env: str) -> Process:
    return Process(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "beat",
            "--loglevel=INFO",
            f"--schedule={workdir / 'beat-schedule'}",
            f"--pidfile={workdir / 'beat.pid'}",
        ],
        env=celery_env(broker_url, **extra_env),
        log=workdir / "beat.log",
    )
