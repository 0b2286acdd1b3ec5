"""Which workload held a GPU at a moment, as a rule: plain rows in, no ORM.

An allocation covers `[since, until)` (`until` None while held). A health event is matched
by its GPU row first and by its GPU's serial second, so an event on a GPU that has since
moved servers (a new GPU row, the allocation's GPU link gone) still finds its job.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple


class HeldSpan(NamedTuple):
    """One allocation, as the rule needs it: what it held, when, and the holder to copy."""

    gpu_id: int | None
    gpu_serial: str
    since: datetime
    until: datetime | None
    holder: dict[str, Any]


def covers(span: HeldSpan, at: datetime) -> bool:
    return span.since <= at and (span.until is None or at < span.until)


class HolderIndex:
    """Spans by GPU id and by serial, for many lookups over one batch's rows."""

    def __init__(self, spans: Iterable[HeldSpan]) -> None:
        self.by_gpu: dict[int, list[HeldSpan]] = {}
        self.by_serial: dict[str, list[HeldSpan]] = {}
        for span in spans:
            if span.gpu_id is not None:
                self.by_gpu.setdefault(span.gpu_id, []).append(span)
            if span.gpu_serial:
                self.by_serial.setdefault(span.gpu_serial, []).append(span)

    def holder_at(self, gpu_id: int | None, gpu_serial: str, at: datetime) -> dict[str, Any] | None:
        """The holder of the span covering `at` on that GPU (the latest-started where the
        scheduler shares one), by GPU row, else by serial; None when nothing held it."""
        for spans in (
            self.by_gpu.get(gpu_id, []) if gpu_id is not None else [],
            self.by_serial.get(gpu_serial, []) if gpu_serial else [],
        ):
            found = [s for s in spans if covers(s, at)]
            if found:
                return max(found, key=lambda s: s.since).holder
        return None
