"""What a web process remembers of its heartbeats (`heartbeat.py`): the tokens' hits and the
"seen at" not written yet. Its own module, importing nothing of the services, so the token
services that must forget a hit (revocation, unbinding, a new report) import it at module level
instead of closing a cycle through `heartbeat.py`."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from datetime import datetime

_MOST_REMEMBERED = 200_000  # tokens per process; past it the memory starts again (a fleet's worth)


@dataclass(frozen=True, slots=True)
class _Known:
    """A token's hit, remembered: its server, that server's last report and digest, and until
    when (time.monotonic) it may answer without the statement."""

    server_id: int
    last_report_id: int | None
    digest: str
    until: float


class _Memory:
    """This process's remembered hits and the "seen at" not written yet, under one lock. Off
    until `heartbeat_memory_enable` (config/wsgi.py, for the web process): elsewhere every
    heartbeat is the one statement."""

    def __init__(self) -> None:
        self.enabled = False
        self.threaded = False
        self.generation = 0
        self.reset()

    def reset(self) -> None:
        """Forget every hit and pending value (tests; and a forked child, whose parent writes
        its own); a flusher thread of the previous generation stops."""
        self.lock = threading.Lock()
        self.known: dict[str, _Known] = {}
        self.pending: dict[int, datetime] = {}  # server id -> latest heartbeat, not yet written
        self.flusher: threading.Thread | None = None
        self.generation += 1


_memory = _Memory()
os.register_at_fork(after_in_child=_memory.reset)


def heartbeat_memory_enable(*, flusher: bool = True) -> None:
    """Answer repeated heartbeats from memory in this process and write their last_seen in
    bulk: every ATLAS_HEARTBEAT_FLUSH_S on a daemon thread (`flusher`; tests flush by hand
    with `heartbeat_flush`) and at exit."""
    _memory.enabled = True
    _memory.threaded = flusher


def heartbeat_memory_disable() -> None:
    """Tests: every heartbeat the one statement again; what was pending is dropped."""
    _memory.enabled = False
    _memory.threaded = False
    _memory.reset()


def heartbeat_forget(*key_hashes: str) -> None:
    """Answer these tokens' next heartbeats with the statement again (revoked, unbound, or a
    new report received for them); in this process: the others within ATLAS_HEARTBEAT_CACHE_S."""
    for key_hash in key_hashes:
        _memory.known.pop(key_hash, None)
