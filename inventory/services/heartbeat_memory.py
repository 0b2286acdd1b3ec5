"""What a web process remembers of its heartbeats (`heartbeat.py`): the tokens' hits and the
"seen at" not written yet. Its own module, importing nothing of the services, so the token
services that must forget a hit (revocation, unbinding, a new report) import it at module level
instead of closing a cycle through `heartbeat.py`.

`heartbeat.py` reads and writes it through the functions below (recall, remember, mark_seen,
take_pending, restore_pending, flusher_start), never its state: the lock is held here."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

_MOST_REMEMBERED = 200_000  # tokens per process; past it the memory starts again (a fleet's worth)


@dataclass(frozen=True, slots=True)
class Known:
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
        self.known: dict[str, Known] = {}
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


def recall(key_hash: str, digest: str) -> Known | None:
    """The token's remembered hit when it names this digest and has not expired; else None,
    the entry dropped (another digest, or expired: the statement decides)."""
    if not _memory.enabled:
        return None
    known = _memory.known.get(key_hash)
    if known is None:
        return None
    if known.digest == digest and known.until > time.monotonic():
        return known
    _memory.known.pop(key_hash, None)
    return None


def remember(
    key_hash: str, *, server_id: int, last_report_id: int | None, digest: str, ttl_s: float
) -> None:
    """Remember the statement's hit for `ttl_s` seconds (nothing when the memory is off or
    `ttl_s` is not positive); past _MOST_REMEMBERED tokens the memory starts again."""
    if not _memory.enabled or ttl_s <= 0:
        return
    if len(_memory.known) >= _MOST_REMEMBERED:
        _memory.known = {}
    _memory.known[key_hash] = Known(server_id, last_report_id, digest, time.monotonic() + ttl_s)


def mark_seen(server_id: int, at: datetime) -> bool:
    """Keep `at` as the server's "seen at" for the next flush; True when a flusher thread
    should be started (the memory is threaded and has none yet)."""
    with _memory.lock:
        _memory.pending[server_id] = at
    return _memory.threaded and _memory.flusher is None


def has_pending() -> bool:
    return bool(_memory.pending)


def take_pending() -> dict[int, datetime]:
    """Every pending "seen at" (server id -> time), no longer pending."""
    with _memory.lock:
        pending, _memory.pending = _memory.pending, {}
    return pending


def restore_pending(pending: Mapping[int, datetime]) -> None:
    """Put values taken by `take_pending` back (a failed flush), a newer one marked meanwhile
    kept."""
    with _memory.lock:
        for server_id, seen in pending.items():
            newer = _memory.pending.get(server_id)
            if newer is None or newer < seen:
                _memory.pending[server_id] = seen


def flusher_start(target: Callable[[int], None]) -> None:
    """Start the flusher thread, `target(generation)`, unless one runs already; it should
    return once `is_current(generation)` is false (a reset: tests, a forked child)."""
    with _memory.lock:
        if _memory.flusher is not None:
            return
        _memory.flusher = threading.Thread(
            target=target, args=(_memory.generation,), name="heartbeat-flush", daemon=True
        )
        _memory.flusher.start()


def flusher() -> threading.Thread | None:
    """This process's flusher thread, if started (tests)."""
    return _memory.flusher


def is_current(generation: int) -> bool:
    """Whether no reset came since `generation` was handed to a flusher."""
    return _memory.generation == generation
