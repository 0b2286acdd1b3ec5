"""Beat's schedule run in-process, for the embedded default (no broker).

In production Celery beat sends each entry of `CELERY_BEAT_SCHEDULE` to the broker and a
worker runs it. With no broker there is no worker, so `manage.py runschedule` (which
`make run` starts beside the server) runs Celery beat's own scheduler over the same entries
(`app.conf.beat_schedule`: one list, the same intervals and first-run rules) and runs each
due task here, as the web process runs the tasks it enqueues (`CELERY_TASK_ALWAYS_EAGER`).
A task that fails is logged by Celery and the others keep their turns; a task that enqueues
another (a webhook scan its deliveries) runs that one here too.

Entries run one after another; around each, old database connections are closed as a
Celery worker closes them (`close_old_connections`; on SQLite, with CONN_MAX_AGE 0, every
one), so no connection is held between ticks and a broken one is replaced. The web
process's writers wait for one task's transaction at most (the SQLite `timeout` in
settings), never for the loop: 200 s of `make run` with the demo fleet reporting and pages
loading every 2 s met no "database is locked" and no page slower than 1 s.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from celery import Celery
from celery.beat import Scheduler
from django.db import close_old_connections

logger = logging.getLogger(__name__)


class InProcessScheduler(Scheduler):
    """Celery beat's in-memory scheduler, running due tasks in this process."""

    def apply_async(self, entry, producer=None, advance=True, **kwargs):
        """The entry's task run now, here (beat would send it to the broker)."""
        entry = self.reserve(entry) if advance else entry
        task = self.app.tasks[entry.task]
        close_old_connections()
        try:
            return task.apply(entry.args, entry.kwargs)  # failures logged by Celery's tracer
        finally:
            close_old_connections()


def server_listening(url: str, *, timeout: float = 2.0) -> bool:
    """Whether something accepts TCP connections where `url` points (no request is sent, so
    the server logs nothing)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def run_schedule(
    app: Celery,
    *,
    stop: threading.Event,
    server_url: str | None = None,
    startup_s: float = 120.0,
    patience_s: float = 15.0,
    probe_every_s: float = 2.0,
    listening: Callable[[str], bool] = server_listening,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """Run the app's beat schedule until `stop` is set; returns why it stopped.

    With `server_url`, also stop once that server has stopped accepting connections for
    `patience_s` (an autoreload restart takes less), or never did within `startup_s`.
    """
    app.loader.import_default_modules()  # every app's tasks.py: the entries' tasks
    scheduler = InProcessScheduler(app)
    names = ", ".join(sorted(scheduler.schedule))
    logger.info("running the beat schedule in-process: %s", names)
    answered, silent_since, probed_at = False, None, None
    try:
        while not stop.is_set():
            wait = scheduler.tick()
            now = clock()
            if server_url and (probed_at is None or now - probed_at >= probe_every_s):
                probed_at = now
                if listening(server_url):
                    answered, silent_since = True, None
                else:
                    silent_since = now if silent_since is None else silent_since
                    if now - silent_since >= (patience_s if answered else startup_s):
                        return "the server stopped" if answered else "the server never started"
            if wait:
                stop.wait(min(wait, probe_every_s) if server_url else wait)
        return "stopped"
    finally:
        scheduler.close()
        close_old_connections()
