"""Handing work to the broker without making an agent's request wait while it is away.

A stored report is safe without the broker: it stays pending and beat's sweep applies it.
So a publish that fails is not retried on the request path; instead the breaker remembers
the failure and skips the broker for a while (a black-holed Redis costs every publish its
connect timeouts, seconds each). When the while is over, one trial publish runs in a
background thread and requests go on skipping until it tells whether the broker is back.

State is per process (each web worker learns once per window): it is a cache of the
broker's health, not data, and losing it costs one more failed publish.

pybreaker is not used: it holds its lock for the whole guarded call, so in a threaded web
server every request would queue behind one broker timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)


def _in_a_thread(work: Callable[[], object]) -> None:
    threading.Thread(target=work, name="broker-trial", daemon=True).start()


class BrokerBreaker:
    """A circuit breaker around publishing: closed (publish inline), open (skip), trial."""

    def __init__(
        self,
        retry_after_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        background: Callable[[Callable[[], object]], None] = _in_a_thread,
    ) -> None:
        self.retry_after_s = retry_after_s
        self._clock = clock
        self._background = background
        self._lock = threading.Lock()
        self._open_until: float | None = None  # None: closed, the broker is believed there
        self._trial_running = False

    @property
    def is_open(self) -> bool:
        return self._open_until is not None

    def publish(self, send: Callable[[], object]) -> str:
        """Run `send` now ("sent" or "failed"), in a background trial ("trial"), or not at
        all because the broker is known away ("skipped"). Never raises."""
        with self._lock:
            if self._open_until is not None:
                if self._trial_running or self._clock() < self._open_until:
                    return "skipped"
                self._trial_running = True
                trial = True
            else:
                trial = False
        if trial:
            self._background(lambda: self._attempt(send))
            return "trial"
        return "sent" if self._attempt(send) else "failed"

    def reset(self) -> None:
        with self._lock:
            self._open_until, self._trial_running = None, False

    def _attempt(self, send: Callable[[], object]) -> bool:
        try:
            send()
        except Exception as exc:  # any failure to hand over: the sweep covers the report
            with self._lock:
                was_open = self._open_until is not None
                self._open_until = self._clock() + self.retry_after_s
                self._trial_running = False
            if not was_open:
                # the type only: a broker error may spell out its URL, password included
                logger.warning(
                    "broker unreachable (%s): reports stay pending for the sweep; next try in %ss",
                    type(exc).__name__,
                    self.retry_after_s,
                )
            return False
        with self._lock:
            was_open = self._open_until is not None
            self._open_until, self._trial_running = None, False
        if was_open:
            logger.info("broker reachable again")
        return True
