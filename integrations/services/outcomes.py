"""The report outcome counter: one row per (outcome, HTTP status), added to in SQL.

Counting one report must not cost the agents' endpoint a transaction of its own (a commit,
a WAL flush: it made the heartbeat path 1.7x slower in bench/ingest.py). So each process
adds up its answers in memory and writes the sums at most every ATLAS_METRICS_FLUSH_S
seconds, one UPDATE per outcome; every worker's scrape reads the same rows, at most that
many seconds behind. What a process had not written when it died is lost: a counter may
undercount by a few seconds' worth, never overcount.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import F

from ..choices import ReportOutcome
from ..models import ReportOutcomeCount

logger = logging.getLogger(__name__)

_ACCEPTED = {ReportOutcome.PENDING, ReportOutcome.UNCHANGED, ReportOutcome.APPLIED}


def report_outcome(*, status_code: int, status: str) -> str:
    """The outcome of one answer: a 2xx's `status` when known, else `accepted`; `rejected`
    for every 4xx/5xx (the code tells which)."""
    if not 200 <= status_code < 300:
        return ReportOutcome.REJECTED
    return status if status in _ACCEPTED else ReportOutcome.ACCEPTED


def report_outcomes_add(counts: Counter[tuple[str, int]]) -> None:
    """Add `counts` ((outcome, status code) -> n) to the rows, one UPDATE each."""
    for (outcome, status_code), n in counts.items():
        key = {"outcome": outcome, "status_code": status_code}
        if ReportOutcomeCount.objects.filter(**key).update(count=F("count") + n):
            continue
        try:
            with transaction.atomic():
                ReportOutcomeCount.objects.create(**key, count=n)
        except IntegrityError:  # another process created it first
            ReportOutcomeCount.objects.filter(**key).update(count=F("count") + n)


class OutcomeBuffer:
    """This process's answers not yet written; thread-safe (gunicorn's threaded workers)."""

    def __init__(
        self,
        *,
        flush_every_s: Callable[[], float],
        clock: Callable[[], float] = time.monotonic,
        write: Callable[[Counter[tuple[str, int]]], None] = report_outcomes_add,
    ) -> None:
        self._flush_every_s = flush_every_s
        self._clock = clock
        self._write = write
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, int]] = Counter()
        self._flushed_at = clock()

    def add(self, *, status_code: int, status: str = "") -> None:
        """Count one answer; write the sums when the last write is old enough."""
        key = (report_outcome(status_code=status_code, status=status), status_code)
        with self._lock:
            self._counts[key] += 1
            due = self._clock() - self._flushed_at >= self._flush_every_s()
        if due and not self.flush():
            logger.warning("metrics: report outcomes not written yet", exc_info=True)

    def flush(self) -> bool:
        """Write the sums; False when the write failed (the counts wait for the next one:
        a metric never fails a request)."""
        with self._lock:
            counts, self._counts = self._counts, Counter()
            self._flushed_at = self._clock()
        if not counts:
            return True
        try:
            self._write(counts)
        except DatabaseError:
            with self._lock:
                self._counts.update(counts)
            return False
        return True


outcome_buffer = OutcomeBuffer(flush_every_s=lambda: settings.ATLAS_METRICS_FLUSH_S)


@atexit.register
def _flush_at_exit() -> None:
    """A worker stopping writes what it counted (best effort: the database may be gone)."""
    try:
        outcome_buffer.flush()
    except Exception:  # the interpreter is going away; nothing to tell anyone
        return


def report_outcome_count(*, status_code: int, status: str = "") -> None:
    """Count one answer of the reports endpoint (written within ATLAS_METRICS_FLUSH_S)."""
    outcome_buffer.add(status_code=status_code, status=status)
