"""What the modules of a report's apply share: the change events gathered in one apply (one
bulk insert at its end), and the value helpers every part uses. No queries."""

from __future__ import annotations

from typing import Any

from ..choices import ServerState
from ..models import ChangeEvent, Report, Server, server_state_at

PASSTHROUGH_DRIVERS = frozenset({"vfio-pci", "pci-stub"})


class _Events:
    """ChangeEvents gathered during one apply, written in one bulk insert."""

    def __init__(self, server: Server, report: Report, now) -> None:
        self.server, self.report, self.now = server, report, now
        self.rows: list[ChangeEvent] = []

    def add(self, kind: str, summary: str, *, gpu_id=None, before=None, after=None, server=None):
        self.rows.append(
            ChangeEvent(
                server=server or self.server,
                gpu_id=gpu_id,
                report=self.report,
                kind=kind,
                summary=summary[:500],
                before=before,
                after=after,
                created_at=self.now,
            )
        )


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _described(value: Any) -> bool:
    """Whether a reported value says something: a partial report's null, empty text or empty
    list (`nvidia-smi -L` has no bus id, memory or serial) keeps what is known."""
    return value is not None and value != "" and value != []


def _offline(last_seen, now) -> bool:
    return server_state_at(last_seen, now) in (ServerState.OFFLINE, ServerState.NEVER)
