"""nginx in front of gunicorn, as deploy/nginx ships it, and clients that send slowly.

`Nginx` runs Debian's binary in the foreground from a generated nginx.conf that includes the
shipped deploy/nginx/cluster-atlas-proxy.conf unchanged; only what the site file says about
this host (the port, TLS, the upstream's address) is the test's own, and every path it writes
is under its own directory. `SlowClients` opens slowloris connections: each sends a request
head a byte at a time, slowly, and never finishes it. Shared by the integration test and
bench/slowloris.py.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import sys
import threading
from pathlib import Path

from .services import REPO, Process, free_port, wait_until

PROXY_SNIPPET = REPO / "deploy" / "nginx" / "cluster-atlas-proxy.conf"
GUNICORN_FLAGS = ["--worker-class", "gthread", "--limit-request-line", "8190"]
"""The README's production command's flags besides --bind, --workers and --threads."""


def nginx_binary() -> str | None:
    """Debian's nginx (apt-get install nginx); /usr/sbin may be off a user's PATH."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")


def nginx_conf(workdir: Path, port: int, upstream_port: int) -> str:
    """A whole nginx.conf: this test's listener and upstream around the shipped snippet."""
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};" if os.geteuid() == 0 else ""
    temp = "\n".join(
        f"    {kind}_temp_path {workdir / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""{user}
daemon off;
worker_processes 1;
pid {workdir / "nginx.pid"};
error_log {workdir / "error.log"} warn;
events {{ worker_connections 1024; }}
http {{
    access_log {workdir / "access.log"};
    default_type application/octet-stream;
{temp}
    upstream cluster_atlas_web {{ server 127.0.0.1:{upstream_port}; }}
    server {{
        listen 127.0.0.1:{port};
        server_name _;
        include {PROXY_SNIPPET};
    }}
}}
"""


class Nginx:
    """nginx on a free loopback port in front of `upstream_port`; stop() by its pid."""

    def __init__(self, binary: str, workdir: Path, upstream_port: int) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        conf = workdir / "nginx.conf"
        conf.write_text(nginx_conf(workdir, self.port, upstream_port))
        args = [binary, "-p", f"{workdir}/", "-e", str(workdir / "error.log"), "-c", str(conf)]
        self.process = Process(args, env=dict(os.environ), log=workdir / "nginx.out")
        if not wait_until(lambda: _listening(self.port) or not self.process.alive(), 10):
            raise RuntimeError(f"nginx did not start:\n{self.output()}")
        if not self.process.alive():
            raise RuntimeError(f"nginx exited:\n{self.output()}")

    def output(self) -> str:
        error_log = self.process.log.parent / "error.log"
        logs = error_log.read_text(errors="replace") if error_log.exists() else ""
        return self.process.output() + logs

    def stop(self) -> None:
        self.process.stop()


def start_gunicorn(port: int, env: dict[str, str], log: Path, workers: int, threads: int):
    """gunicorn with the README's production flags on loopback."""
    args = [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}"]
    args += ["--workers", str(workers), "--threads", str(threads), *GUNICORN_FLAGS]
    return Process(args, env=env, log=log)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class SlowClients:
    """`count` connections to `port`, each sending a never-finished request head a byte every
    `interval` seconds from one thread. `open_count()` says how many the server still holds."""

    HEAD = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 4096

    def __init__(self, port: int, count: int, interval: float = 1.0) -> None:
        self.sockets: list[socket.socket] = []
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.setblocking(False)
            self.sockets.append(sock)
        self._sent = 0
        self._stop = threading.Event()
        self._closed: set[int] = set()
        self._thread = threading.Thread(target=self._drip, args=(interval,), daemon=True)
        self._thread.start()

    def _drip(self, interval: float) -> None:
        while not self._stop.is_set() and self._sent < len(self.HEAD):
            byte = self.HEAD[self._sent : self._sent + 1]
            for i, sock in enumerate(self.sockets):
                if i in self._closed:
                    continue
                try:
                    sock.send(byte)
                except OSError:
                    self._closed.add(i)
            self._sent += 1
            self._stop.wait(interval)

    @property
    def sent(self) -> int:
        """Bytes of the head each connection has sent so far."""
        return self._sent

    def open_count(self) -> int:
        """Connections the server has neither closed nor answered."""
        held = 0
        for i, sock in enumerate(self.sockets):
            if i in self._closed:
                continue
            try:
                data = sock.recv(1, socket.MSG_PEEK)
            except BlockingIOError:
                held += 1  # nothing to read: still open, still waiting for its head
                continue
            except OSError:
                data = b""
            if not data:
                self._closed.add(i)
            # any data: the server answered (an error page) instead of waiting
        return held

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for sock in self.sockets:
            sock.close()


def wait_for_http(port: int, timeout: float) -> bool:
    return wait_until(lambda: _listening(port), timeout, 0.2)
