"""Follow the kernel log live: /dev/kmsg with a saved position, `journalctl -k` where that is all.

/dev/kmsg answers one record per read (`prio,seq,usec,flags;message`, then ` KEY=value` lines),
EAGAIN when there is nothing new and EPIPE when the record under the reader was overwritten
(the ring buffer wrapped: the next read returns the oldest record still there). The record's
sequence number is the position: saved with the boot id, so a restarted agent skips what it
already delivered and a new boot starts from its first record.

The position moves in two steps. `poll()` reads what is new and keeps it pending; `commit()`
saves the position once the report holding those events was delivered (sent or spooled). A
report that never arrives is not lost: the next poll's events include every pending batch,
each under its own keys, so the backend stores each occurrence once even when it comes twice.

Where /dev/kmsg cannot be opened (no permission, a container), `journalctl -k -o json` with a
saved cursor gives the same messages; where neither works the report says so in a warning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from .host import run_command
from .sources.kernel_log import (
    MAX_REPORT_EVENTS,
    UTC,
    KernelEvent,
    KernelLogParser,
    journal_key,
    journal_time,
    unescape_kmsg,
)

KMSG = "/dev/kmsg"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
RECORD_BYTES = 16384  # larger than any printk record
JOURNAL_TIMEOUT_S = 30.0
Runner = Callable[[Sequence[str]], "str | None"]


class RecordSource(Protocol):
    """One kmsg record per `read()`; None when there is nothing new."""

    overwritten: int

    def read(self) -> bytes | None: ...
    def close(self) -> None: ...


class KmsgDevice:
    """The real /dev/kmsg, opened non-blocking."""

    def __init__(self, path: str = KMSG) -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        self.overwritten = 0

    def read(self) -> bytes | None:
        while True:
            try:
                return os.read(self.fd, RECORD_BYTES)
            except BlockingIOError:
                return None
            except BrokenPipeError:  # EPIPE: records were overwritten under us; go on
                self.overwritten += 1
            except InterruptedError:
                continue

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


@dataclass(frozen=True)
class KmsgRecord:
    facility: int
    seq: int
    usec: int
    message: str


def parse_record(raw: bytes) -> KmsgRecord | None:
    """`6,1234,5678901,-;text\\n KEY=value\\n` -> a record; None when it is not one."""
    head, sep, rest = raw.partition(b";")
    if not sep:
        return None
    fields = head.split(b",")
    try:
        prio, seq, usec = int(fields[0]), int(fields[1]), int(fields[2])
    except (IndexError, ValueError):
        return None
    text = unescape_kmsg(rest.split(b"\n", 1)[0].decode("utf-8", "replace"))
    return KmsgRecord(facility=prio >> 3, seq=seq, usec=usec, message=text)


def read_boot_id(path: str = BOOT_ID) -> str | None:
    try:
        return Path(path).read_text("ascii").strip() or None
    except OSError:
        return None


def boot_wall_time() -> datetime:
    """When this boot started, on the clock kmsg's microseconds count from (monotonic)."""
    return datetime.now(UTC) - timedelta(seconds=time.clock_gettime(time.CLOCK_MONOTONIC))


@dataclass
class Position:
    """Where the follower stands: a kmsg sequence number of one boot, or a journal cursor."""

    source: str = "kmsg"
    boot_id: str | None = None
    seq: int | None = None
    cursor: str | None = None

    @classmethod
    def load(cls, path: Path | None) -> Position | None:
        if path is None:
            return None
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        seq = data.get("seq")
        return cls(
            source=str(data.get("source") or "kmsg"),
            boot_id=data.get("boot_id") if isinstance(data.get("boot_id"), str) else None,
            seq=seq if isinstance(seq, int) else None,
            cursor=data.get("cursor") if isinstance(data.get("cursor"), str) else None,
        )

    def save(self, path: Path) -> None:
        """Atomically: a crash leaves the old position or the new one, never half of one."""
        path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps(self.__dict__, sort_keys=True).encode()
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".position-")
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)


@dataclass
class KernelLogFollower:
    """Reads new kernel messages each poll and turns them into events (see the module)."""

    state_file: Path | None = None
    kmsg_path: str = KMSG
    boot_id_path: str = BOOT_ID
    runner: Runner | None = None
    open_kmsg: Callable[[str], RecordSource] = KmsgDevice
    boot_time: datetime | None = None
    warnings: list[str] = field(default_factory=list)
    _device: RecordSource | None = None
    _mode: str | None = None  # "kmsg", "journal" or "none"
    _committed: Position | None = None
    _read: Position | None = None
    _pending: list[list[KernelEvent]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._committed = Position.load(self.state_file)
        self._read = self._committed

    # -- the two steps -------------------------------------------------------------------

    def poll(self) -> list[KernelEvent]:
        """Read what is new; every event not yet committed, oldest batch first."""
        self.warnings = []
        if self._mode is None:
            self._mode = self._open()
        if self._mode == "kmsg":
            batch = self._poll_kmsg()
        elif self._mode == "journal":
            batch = self._poll_journal()
        else:
            batch = []
        if batch:
            self._pending.append(batch)
        self._bound_pending()
        return [event for pending in self._pending for event in pending]

    def commit(self) -> None:
        """The events of every poll so far were delivered: save the position, drop them."""
        self._pending.clear()
        if self._read is not None and self._read != self._committed:
            if self.state_file is not None:
                try:
                    self._read.save(self.state_file)
                except OSError as exc:
                    self.warnings.append(f"kernel log position not saved: {exc.strerror}")
                    return
            self._committed = Position(**self._read.__dict__)

    def close(self) -> None:
        if self._device is not None:
            self._device.close()
            self._device = None

    # -- sources -------------------------------------------------------------------------

    def _open(self) -> str:
        try:
            self._device = self.open_kmsg(self.kmsg_path)
            return "kmsg"
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
        if self._run(["journalctl", "--version"]) is not None:
            return "journal"
        self.warnings.append(
            f"kernel log unreadable: {self.kmsg_path}: {reason}, and no journalctl; "
            "GPU Xid events are not reported"
        )
        return "none"

    def _run(self, argv: Sequence[str]) -> str | None:
        if self.runner is not None:
            return self.runner(argv)
        return run_command(argv, timeout=JOURNAL_TIMEOUT_S)

    def _poll_kmsg(self) -> list[KernelEvent]:
        assert self._device is not None
        boot_id = read_boot_id(self.boot_id_path)
        start = self._read
        same_boot = start is not None and start.source == "kmsg" and start.boot_id == boot_id
        after = start.seq if same_boot and start and start.seq is not None else -1
        parser = KernelLogParser(boot_time=self.boot_time or boot_wall_time(), tz=UTC)
        first_seen: int | None = None
        last = after
        before = self._device.overwritten
        while True:
            raw = self._device.read()
            if raw is None:
                break
            record = parse_record(raw)
            if record is None or record.seq <= after:
                continue
            if first_seen is None:
                first_seen = record.seq
            last = record.seq
            if record.facility != 0:  # only the kernel's own messages, not writes to kmsg
                continue
            assert parser.boot_time is not None
            when = parser.boot_time + timedelta(microseconds=record.usec)
            parser.feed_message(record.message, when, f"kmsg:{boot_id}:{record.seq}")
        lost = self._device.overwritten - before
        if first_seen is not None and after >= 0 and first_seen > after + 1:
            lost = max(lost, first_seen - after - 1)
        if lost:
            self.warnings.append(
                f"kernel log: {lost} records were overwritten before the agent read them"
            )
        self.warnings.extend(parser.warnings)
        self._read = Position(source="kmsg", boot_id=boot_id, seq=last if last >= 0 else None)
        return parser.result()

    def _poll_journal(self) -> list[KernelEvent]:
        start = self._read
        argv = ["journalctl", "-k", "-o", "json", "--no-pager"]
        if start is not None and start.source == "journal" and start.cursor:
            argv += ["--after-cursor", start.cursor]
        else:
            argv += ["-b"]
        out = self._run(argv)
        if out is None:
            self.warnings.append("kernel log: journalctl -k failed; GPU Xid events not read")
            return []
        parser = KernelLogParser(tz=UTC)
        cursor = start.cursor if start is not None and start.source == "journal" else None
        for line in out.splitlines():
            try:
                entry: Any = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            cursor = entry.get("__CURSOR") if isinstance(entry.get("__CURSOR"), str) else cursor
            message = entry.get("MESSAGE")
            if isinstance(message, str):
                parser.feed_message(message, journal_time(entry), journal_key(entry))
        self.warnings.extend(parser.warnings)
        self._read = Position(source="journal", cursor=cursor)
        return parser.result()

    def _bound_pending(self) -> None:
        """Undelivered batches pile up while the backend is away: past the report's bound,
        the oldest two fold into one (counts kept, exact once-only storage given up)."""
        while len(self._pending) > 1 and sum(map(len, self._pending)) > MAX_REPORT_EVENTS:
            first, second = self._pending[0], self._pending[1]
            self._pending[:2] = [fold(first + second)]
        if self._pending and len(self._pending[0]) > MAX_REPORT_EVENTS:
            self._pending[0] = self._pending[0][-MAX_REPORT_EVENTS:]
            self.warnings.append("kernel log: more distinct events than a report holds")


def fold(events: list[KernelEvent]) -> list[KernelEvent]:
    """Events of several batches, one per (kind, code, bus): counts add up, times widen."""
    merged: dict[tuple[str, int | None, str | None], KernelEvent] = {}
    for event in events:
        ident = (event.kind, event.code, event.pci_bus_id)
        known = merged.get(ident)
        if known is None:
            merged[ident] = dataclasses.replace(event)
            continue
        known.count += event.count
        if event.last_time and (known.last_time is None or event.last_time > known.last_time):
            known.last_time = event.last_time
        known.last_key = event.last_key or event.key or known.last_key
        known.gpu_uuid = known.gpu_uuid or event.gpu_uuid
    return list(merged.values())
