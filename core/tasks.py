"""What every app's Celery tasks share: one retry policy, one way to enqueue.

Retrying: a task that touches the database retries a lost connection (`OperationalError`:
a restarted PostgreSQL, a dropped connection, SQLite's "database is locked") with
exponential backoff and jitter, up to `RETRY_MAX` times over about three minutes; anything
else is a bug to see, not to retry. `retry_policy()` gives those options to `shared_task`,
with any other transient errors a task adds (a webhook's network errors).

Enqueueing: a hand-off to the broker never raises into its caller. Every periodic task is
idempotent and beat runs it again (a pending report or snapshot is applied by its sweep, a
lost reconcile by the next tick), so a broker that is away costs a warning and a delay,
never the caller's request or transaction. Celery's own connection retries are off
(`retry=False`): they would hold the caller for seconds while Redis is away.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from celery import Task
from django.core.cache import cache
from django.db import OperationalError, transaction

logger = logging.getLogger(__name__)

RETRIED: tuple[type[Exception], ...] = (OperationalError,)
"""What a task retries by itself: the database is away for a moment."""

RETRY_MAX = 8
RETRY_BACKOFF_MAX_S = 60


def retry_policy(*also: type[Exception]) -> dict[str, Any]:
    """`shared_task` options that retry `RETRIED` (and `also`) with backoff: 1, 2, 4 ... 60
    seconds (with jitter), `RETRY_MAX` times; then the error is raised and logged."""
    return {
        "autoretry_for": (*RETRIED, *also),
        "retry_backoff": True,
        "retry_backoff_max": RETRY_BACKOFF_MAX_S,
        "retry_jitter": True,
        "max_retries": RETRY_MAX,
    }


def send_or_log(send: Callable[[], object], *, what: str, then: str = "") -> bool:
    """Run `send` (a hand-off to the broker); on any failure log one warning naming `what`
    and the error's type (a broker error may spell out its URL, password included) and
    return False. Never raises."""
    try:
        send()
    except Exception as exc:  # the broker is away: a periodic pass catches up
        logger.warning(
            "could not enqueue %s (%s)%s", what, type(exc).__name__, f"; {then}" if then else ""
        )
        return False
    return True


def enqueue(task: Task, *args: Any, **kwargs: Any) -> bool:
    """Send `task` with these arguments now; False (logged) when the broker is away.

    With `CELERY_TASK_ALWAYS_EAGER` (the embedded default) the task runs here and now.
    """
    return send_or_log(
        lambda: task.apply_async(args, kwargs, retry=False),
        what=task.name,
        then="a periodic pass catches up",
    )


def enqueue_on_commit(task: Task, *args: Any, **kwargs: Any) -> None:
    """`enqueue` once the current transaction commits (at once outside one); nothing is sent
    for a transaction that rolls back."""
    transaction.on_commit(partial(enqueue, task, *args, **kwargs))


def enqueue_soon(task: Task, *, window_s: float) -> bool:
    """`enqueue` a task that takes no arguments and does whatever is due (a sweep), at most
    once per `window_s` per process with a broker, so a burst of callers queues one run, not
    one each; beat's tick for the task covers a call that falls inside the window after the
    run has begun. In-process (eager) the task runs at every call, as beat's tick would.

    True when it was sent (or run).
    """
    if task.app.conf.task_always_eager:
        return enqueue(task)
    key = f"core.tasks:soon:{task.name}"
    if not cache.add(key, True, timeout=window_s):
        return False
    if not enqueue(task):
        cache.delete(key)
        return False
    return True
