"""Kernel log lines -> GPU health events: XID, NVSwitch SXID, fallen off the bus, probe failures.

Reads every form a kernel log is commonly saved in, told apart line by line:

- plain `dmesg` and `journalctl -k -o short-monotonic`: `[ 1843.308145] NVRM: ...` (seconds
  since boot: absolute only when the boot time is known);
- `dmesg --ctime` / `-T`: `[Sun Feb 23 16:24:18 2025] ...` (local time);
- `dmesg --time-format iso`, with or without `--decode` (`kern  :warn  : 2025-01-21T04:41:44,283302
  +00:00 ...`), and `journalctl -k -o short-iso[-precise]` / RFC 3339 syslog;
- `journalctl -k` (short) and `/var/log/kern.log`: `Feb 23 16:24:18 host kernel: ...` (no year:
  the year of `now`, or the one before when that would lie in the future);
- `/dev/kmsg` records (`prio,seq,usec,flags;message`) and `journalctl -k -o json` lines.

A line with no recognisable prefix (a multi-line message continued on an indented line)
belongs to the line before it. The parser is a stream: `feed` one line at a time, memory stays
bounded whatever the input (a 1,000,000-line log, a 100,000-line storm of one Xid): repeats of
one (kind, code, PCI bus) fold into one event with a count, first and last time, and at most
`max_events` distinct events are kept (the rest are counted in `dropped`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from typing import IO, Any

from ..schema import MAX_WARNINGS, normalize_pci_bus_id

KINDS = ("xid", "sxid", "fallen_off_bus", "probe_failure")
MAX_EVENTS = 256  # distinct events one parse keeps
MAX_REPORT_EVENTS = 1024  # the schema's bound on a report's events
MAX_MESSAGE = 500
MAX_LINE = 65536  # longer lines are cut: no kernel line is this long
UTC = timezone.utc  # noqa: UP017 - the agent runs on Python 3.10
_PENDING_LINES = 4  # "The NVIDIA GPU <bus>" ... "fallen off the bus": within this many lines
_MONTHS = {
    m: i
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}

_BUS = r"(?:PCI:)?(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)"
_PREFIX = re.compile(
    r"(?:[a-z]+\s*:[a-z]+\s*:\s)?"  # dmesg --decode: "kern  :warn  : "
    r"(?:\[\s*(?P<mono>\d+\.\d+)\]"
    r"|\[(?P<ctime>[A-Z][a-z]{2} (?P<cmon>[A-Z][a-z]{2}) [ \d]\d \d\d:\d\d:\d\d \d{4})\]"
    r"|(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?)"
    r"|(?P<short>(?P<smon>[A-Z][a-z]{2}) +(?P<sday>\d{1,2}) (?P<stime>\d\d:\d\d:\d\d(?:\.\d+)?))"
    r"|(?P<kprio>\d+),(?P<kseq>\d+),(?P<kusec>\d+),[^;]*;)"
)
_MONO = re.compile(r"\[\s*(\d+\.\d+)\] (?!\S+ kernel: )")
# After a syslog/journal stamp: "host kernel: " and maybe the kernel's own "[ 123.456] ".
_HOST_KERNEL = re.compile(r"\s+(?:\S+\s+)?kernel:\s?(?:\[\s*(?P<mono>\d+\.\d+)\]\s?)?")
_XID = re.compile(r"NVRM: Xid \(" + _BUS + r"\): (?P<code>\d+)(?:,\s*(?P<rest>.*))?")
_SXID = re.compile(r"SXid \(" + _BUS + r"\): (?P<code>\d+)(?:,\s*(?P<rest>.*))?")
_GPU_UUID = re.compile(r"NVRM: GPU at " + _BUS + r": (?P<uuid>GPU-[0-9a-fA-F-]{36})")
_THE_GPU = re.compile(r"NVRM: The NVIDIA GPU " + _BUS)
_FALLEN = re.compile(r"GPU (?:at )?" + _BUS + r":? (?:GPU )?has fallen off the bus")
_PROBE = re.compile(
    r"(?:nvidia " + _BUS + r": probe with driver nvidia failed"
    r"|nvidia: probe of " + _BUS.replace("bus>", "bus2>") + r" failed"
    r"|NVRM: (?:GPU " + _BUS.replace("bus>", "bus3>") + r": )?RmInitAdapter failed"
    r"|NVRM: rm_init_adapter failed)"
)
_KMSG_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")
_DETAIL_SXID = ("Severity ", "Data {")  # follow-up lines of one SXid, not a new one


# A time as the log wrote it: seconds since boot, a datetime, or a prefix match to convert.
Stamp = float | datetime | tuple[re.Match[str], str | None] | None


def unescape_kmsg(text: str) -> str:
    """/dev/kmsg escapes newlines, other control bytes and backslashes as `\\xNN`."""
    return _KMSG_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text) if "\\x" in text else text


@lru_cache(maxsize=4096)
def pci_bus(raw: str | None) -> str | None:
    """The kernel's `0000:9b:00` (no function) or `0000:9b:00.0` -> `0000:9b:00.0`."""
    if not raw:
        return None
    return normalize_pci_bus_id(raw if "." in raw else raw + ".0")


def iso(value: datetime | None) -> str | None:
    """UTC, `Z`, microseconds only when there are any: the report's time format."""
    if value is None:
        return None
    value = value.astimezone(UTC)
    spec = "%Y-%m-%dT%H:%M:%S.%fZ" if value.microsecond else "%Y-%m-%dT%H:%M:%SZ"
    return value.strftime(spec)


@dataclass(slots=True)
class KernelEvent:
    """One (kind, code, PCI bus) seen `count` times, from `time` to `last_time`.

    `key` names where its first occurrence lies (`kmsg:<boot id>:<seq>`), when the source has
    such a position: the backend stores an event exactly once by it, even when it comes twice.
    """

    kind: str
    code: int | None
    pci_bus_id: str | None
    message: str
    time: datetime | None
    last_time: datetime | None
    count: int = 1
    key: str | None = None
    last_key: str | None = None
    gpu_uuid: str | None = None

    @property
    def span_key(self) -> str | None:
        """`kmsg:<boot>:<first seq>-<last seq>`: exactly the occurrences this event counts."""
        if self.key is None or self.last_key is None or self.last_key == self.key:
            return self.key
        return f"{self.key}-{self.last_key.rsplit(':', 1)[-1]}"[:128]

    def as_report(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "code": self.code,
            "pci_bus_id": self.pci_bus_id,
            "gpu_uuid": self.gpu_uuid,
            "time": iso(self.time),
            "last_time": iso(self.last_time) if self.count > 1 else None,
            "message": self.message,
            "count": self.count,
            "key": self.span_key,
        }


@dataclass
class KernelLogParser:
    """Feed kernel log lines (or kmsg/journal messages); read the events at the end.

    `boot_time` turns seconds-since-boot stamps into times (unknown: those events get no
    time); `tz` is the zone of stamps that carry none (dmesg --ctime, journal short: the
    local zone by default); `now` dates year-less journal stamps.
    """

    boot_time: datetime | None = None
    tz: tzinfo | None = None
    now: datetime | None = None
    max_events: int = MAX_EVENTS
    events: dict[tuple[str, int | None, str | None], KernelEvent] = field(default_factory=dict)
    uuids: dict[str, str] = field(default_factory=dict)  # bus -> UUID, from the log itself
    lines: int = 0
    dropped: int = 0
    _last_stamp: Stamp = None
    _stamps: dict[tuple[str, int | None, str | None], list[Stamp]] = field(default_factory=dict)
    _pending_bus: str | None = None
    _pending_left: int = 0

    def __post_init__(self) -> None:
        if self.tz is None:
            self.tz = datetime.now().astimezone().tzinfo
        if self.now is None:
            self.now = datetime.now(UTC)

    # -- input ---------------------------------------------------------------------------

    def feed(self, line: str) -> None:
        """One line of a saved log, in any of the forms the module names."""
        self.lines += 1
        if "NVRM" not in line and "SXid" not in line and "nvidia" not in line:
            if self._pending_left:
                self._pending_left -= 1
            return
        if line[:1] == "{":
            self._feed_json(line)
            return
        fast = _MONO.match(line)  # plain dmesg, the commonest form: no alternatives to try
        if fast is not None:
            stamp: Stamp = float(fast.group(1))
            self._last_stamp = stamp
            self._message(line[fast.end() :].strip(), stamp, None)
            return
        match = _PREFIX.match(line)
        if match is None:  # a continuation line: the time of the line before
            self._message(line.strip(), self._last_stamp, None)
            return
        # Times are kept as they were written (a "stamp") and converted once per event at
        # the end: a storm of one Xid converts two, not 100,000.
        rest = line[match.end() :]
        mono = match["mono"]
        if mono is not None:  # journalctl -o short-monotonic: "[ 12.5] host kernel: ..."
            stamp = float(mono)
            tail = _HOST_KERNEL.match(rest)
            if tail is not None:
                rest = rest[tail.end() :]
        elif match["kseq"] is not None:  # a saved /dev/kmsg: one record, newlines escaped
            if int(match["kprio"]) >> 3:
                return  # not the kernel's own message (a write to /dev/kmsg)
            stamp = int(match["kusec"]) / 1e6
            self._last_stamp = stamp
            for part in unescape_kmsg(rest).split("\n"):
                self._message(part.strip(), stamp, None)  # no boot id: no position key
            return
        else:
            tail = _HOST_KERNEL.match(rest)
            kernel_mono = None
            if tail is not None:
                rest = rest[tail.end() :]
                kernel_mono = tail["mono"]
            stamp = (match, kernel_mono)
        self._last_stamp = stamp
        self._message(rest.strip(), stamp, None)

    def feed_message(self, message: str, time: datetime | None, key: str | None = None) -> None:
        """One kernel message whose time and position are known (a kmsg record, a journal
        entry); a message of several lines is several lines of the log."""
        for part in message.split("\n"):
            self.lines += 1
            if "NVRM" in part or "SXid" in part or "nvidia" in part:
                self._last_stamp = time
                self._message(part.strip(), time, key)
            elif self._pending_left:
                self._pending_left -= 1

    def _feed_json(self, line: str) -> None:
        """`journalctl -k -o json`: MESSAGE, __REALTIME_TIMESTAMP (µs), _BOOT_ID, __SEQNUM."""
        try:
            entry = json.loads(line)
        except ValueError:
            return
        message = entry.get("MESSAGE") if isinstance(entry, dict) else None
        if isinstance(message, list):  # journald sends non-UTF-8 messages as byte arrays
            message = bytes(b & 0xFF for b in message if isinstance(b, int)).decode(
                "utf-8", "replace"
            )
        if not isinstance(message, str):
            return
        self.lines -= 1  # feed_message counts the message's own lines
        self.feed_message(message, journal_time(entry), journal_key(entry))

    # -- time ----------------------------------------------------------------------------

    def _since_boot(self, seconds: float) -> datetime | None:
        if self.boot_time is None:
            return None
        try:
            return self.boot_time + timedelta(seconds=seconds)
        except OverflowError:  # a stamp no boot lasts (a corrupted line): no time
            return None

    def _time(self, stamp: Stamp) -> datetime | None:
        if stamp is None or isinstance(stamp, datetime):
            return stamp
        if isinstance(stamp, float):
            return self._since_boot(stamp)
        match, kernel_mono = stamp
        value = self._absolute(match)
        if value is None and kernel_mono:
            value = self._since_boot(float(kernel_mono))
        return value

    def _absolute(self, match: re.Match[str]) -> datetime | None:
        try:
            if match["iso"] is not None:
                text = match["iso"].replace(",", ".")
                if text.endswith("Z"):
                    text = text[:-1] + "+00:00"
                if "." in text:  # Python 3.10 takes at most 6 fraction digits
                    head, _, frac = text.partition(".")
                    digits = re.match(r"\d+", frac)[0]  # type: ignore[index]
                    text = f"{head}.{digits[:6].ljust(6, '0')}{frac[len(digits) :]}"
                value = datetime.fromisoformat(text)
            elif match["ctime"] is not None:
                value = datetime.strptime(match["ctime"], "%a %b %d %H:%M:%S %Y")
            else:
                value = self._year_less(match)
        except (ValueError, KeyError, OverflowError):  # no such date, month or number: no time
            return None
        return value if value.tzinfo else value.replace(tzinfo=self.tz)

    def _year_less(self, match: re.Match[str]) -> datetime:
        assert self.now is not None
        month = _MONTHS[match["smon"]]
        clock, _, frac = match["stime"].partition(".")
        hour, minute, second = (int(p) for p in clock.split(":"))
        micro = int(frac[:6].ljust(6, "0")) if frac else 0
        now = self.now.astimezone(self.tz)
        value = datetime(now.year, month, int(match["sday"]), hour, minute, second, micro)
        if value.replace(tzinfo=self.tz) > now + timedelta(days=1):
            value = value.replace(year=now.year - 1)  # December's lines read in January
        return value

    # -- messages ------------------------------------------------------------------------

    def _message(self, text: str, time: Stamp, key: str | None) -> None:
        if "Xid" in text:
            found = _XID.search(text)
            if found is not None:
                self._add("xid", int(found["code"]), found["bus"], found["rest"], time, key)
                return
            found = _SXID.search(text)
            if found is not None:
                rest = found["rest"] or ""
                if not rest.startswith(_DETAIL_SXID):
                    self._add("sxid", int(found["code"]), found["bus"], rest, time, key)
                return
        if "fallen off the bus" in text:
            found = _FALLEN.search(text) or _THE_GPU.search(text)
            bus = found["bus"] if found else (self._pending_bus if self._pending_left else None)
            self._add("fallen_off_bus", None, bus, text, time, key)
            self._pending_left = 0
            return
        if "NVRM: GPU at" in text:
            found = _GPU_UUID.search(text)
            if found is not None:
                bus = pci_bus(found["bus"])
                if bus and (bus in self.uuids or len(self.uuids) < 64):
                    self.uuids[bus] = found["uuid"]
                return
        if "The NVIDIA GPU" in text:
            found = _THE_GPU.search(text)
            if found is not None:
                self._pending_bus, self._pending_left = found["bus"], _PENDING_LINES
                return
        if "failed" in text:
            found = _PROBE.search(text)
            if found is not None:
                bus = found["bus"] or found["bus2"] or found["bus3"]
                self._add("probe_failure", None, bus, text, time, key)
                return
        if self._pending_left:
            self._pending_left -= 1

    def _add(
        self,
        kind: str,
        code: int | None,
        raw_bus: str | None,
        message: str | None,
        time: Stamp,
        key: str | None,
    ) -> None:
        bus = pci_bus(raw_bus)
        ident = (kind, code, bus)
        event = self.events.get(ident)
        if event is not None:
            event.count += 1
            if key is not None:
                event.last_key = key
            if time is not None:
                self._stamps[ident][1] = time
            return
        if len(self.events) >= self.max_events:
            self.dropped += 1
            return
        text = (message or "").strip() or kind.replace("_", " ")
        self.events[ident] = KernelEvent(
            kind=kind,
            code=code,
            pci_bus_id=bus,
            message=text[:MAX_MESSAGE],
            time=None,
            last_time=None,
            key=key,
            last_key=key,
        )
        self._stamps[ident] = [time, time]

    # -- output --------------------------------------------------------------------------

    def result(self, gpu_uuids: dict[str, str] | None = None) -> list[KernelEvent]:
        """The events, oldest first; `gpu_uuids` (bus -> UUID, the report's GPUs) names the
        GPU of each, else the log's own `GPU at PCI:...: GPU-...` line does. A fallen-off-the-
        bus line for a bus that also has an Xid 79 is that Xid's second line, not an event."""
        for ident, (first, last) in self._stamps.items():
            event = self.events[ident]
            event.time = self._time(first)
            event.last_time = self._time(last) if last is not first else event.time
            if event.time is None:
                event.time = event.last_time
        self._stamps.clear()
        known = dict(self.uuids)
        known.update(gpu_uuids or {})
        lost_by_xid = {
            e.pci_bus_id for e in self.events.values() if e.kind == "xid" and e.code == 79
        }
        out = []
        for event in self.events.values():
            if event.kind == "fallen_off_bus" and event.pci_bus_id in lost_by_xid:
                continue
            if event.pci_bus_id and event.kind != "sxid":  # an SXid's bus is an NVSwitch
                event.gpu_uuid = known.get(event.pci_bus_id)
            out.append(event)
        out.sort(key=lambda e: e.time or datetime.max.replace(tzinfo=UTC))
        return out

    @property
    def warnings(self) -> list[str]:
        if not self.dropped:
            return []
        return [
            f"kernel log: {self.dropped} lines of more than {self.max_events} distinct GPU "
            "events were counted but not listed"
        ]


def journal_time(entry: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(entry["__REALTIME_TIMESTAMP"]) / 1e6, UTC)
    except (KeyError, TypeError, ValueError, OverflowError, OSError):
        return None


def journal_key(entry: dict[str, Any]) -> str | None:
    boot, seq = entry.get("_BOOT_ID"), entry.get("__SEQNUM")
    if isinstance(boot, str) and isinstance(seq, str | int) and boot:
        return f"journal:{boot}:{seq}"[:128]
    return None


def iter_lines(stream: IO[str], limit: int = MAX_LINE, chunk: int = 1 << 16) -> Iterator[str]:
    """Lines of a text stream without their line ends, each cut at `limit` characters.

    Read in chunks and split in C (a million lines in a tenth of a second); memory stays
    within a chunk and a line whatever the file holds, even a file without a newline.
    """
    rest = ""
    first = True
    while True:
        block = stream.read(chunk)
        if not block:
            break
        if first:
            block = block.lstrip("\ufeff")
            first = False
        lines = (rest + block).split("\n")
        rest = lines.pop()[: limit + 1]  # an unfinished line, never more than a line
        for line in lines:
            if len(line) > limit:
                line = line[:limit]
            yield line[:-1] if line.endswith("\r") else line
    if rest:
        rest = rest[:limit]
        yield rest[:-1] if rest.endswith("\r") else rest


def parse_kernel_log(
    lines: Iterable[str],
    *,
    boot_time: datetime | None = None,
    tz: tzinfo | None = None,
    now: datetime | None = None,
    gpu_uuids: dict[str, str] | None = None,
) -> tuple[list[KernelEvent], list[str]]:
    """Events and warnings from saved kernel log lines (see the module for the forms)."""
    parser = KernelLogParser(boot_time=boot_time, tz=tz, now=now)
    for line in lines:
        parser.feed(line)
    return parser.result(gpu_uuids), parser.warnings


def attach_events(
    report: dict[str, Any], events: list[KernelEvent], warnings: Iterable[str] = ()
) -> dict[str, Any]:
    """Put `events` into the report as its `events` list, each naming its GPU by the bus the
    report's GPUs sit on (a real UUID only), and the source's warnings beside the others."""
    by_bus = {
        gpu["pci_bus_id"]: gpu["uuid"]
        for gpu in report.get("gpus", [])
        if gpu.get("pci_bus_id") and not gpu.get("uuid_synthetic")
    }
    items = []
    for event in events[:MAX_REPORT_EVENTS]:
        item = event.as_report()
        if event.kind != "sxid" and event.pci_bus_id in by_bus:
            item["gpu_uuid"] = by_bus[event.pci_bus_id]
        items.append(item)
    report["events"] = items
    extra = [w for w in warnings if w not in report.get("warnings", [])]
    if extra:
        report["warnings"] = [*report.get("warnings", []), *extra][:MAX_WARNINGS]
    return report


def looks_like_kernel_log(line: str) -> bool:
    """True for a line in one of the forms the module names (its time stamp or record)."""
    return line[:1] == "{" or _MONO.match(line) is not None or _PREFIX.match(line) is not None


@dataclass
class LogShape:
    """How many lines a saved log holds, and whether any of the first looks like a kernel
    log line: an empty file and a file of something else both give 0 events, and say so."""

    lines: int = 0
    kernel_lines: bool = False
    sample: int = 1000  # lines checked for a kernel log form (a regex each: the first only)

    def count(self, lines: Iterable[str]) -> Iterator[str]:
        for line in lines:
            if line.strip():
                self.lines += 1
                if not self.kernel_lines and self.lines <= self.sample:
                    self.kernel_lines = looks_like_kernel_log(line)
            yield line

    def warnings(self, path: str) -> list[str]:
        if not self.lines:
            return [f"kernel log {path} is empty: it holds no kernel log lines, so no GPU events"]
        if not self.kernel_lines:
            first = min(self.lines, self.sample)
            return [
                f"kernel log {path}: none of its first {first} lines is a kernel log line "
                "(dmesg, journalctl -k, kern.log): is it the right file? No GPU events read"
            ]
        return []


@dataclass
class SavedKernelLog:
    """A saved kernel log as an event source: its events go with the next delivered report,
    once (`commit`); a push loop does not send the same file's events every cycle. An empty
    file, or one without kernel log lines, is said in `warnings` (a log with lines and no GPU
    events is a quiet, healthy log: no warning)."""

    path: str
    boot_time: datetime | None = None
    warnings: list[str] = field(default_factory=list)
    _events: list[KernelEvent] | None = None
    _delivered: bool = False

    def poll(self) -> list[KernelEvent]:
        if self._delivered:
            return []
        if self._events is None:
            shape = LogShape()
            with open(self.path, encoding="utf-8", errors="replace") as stream:
                self._events, warnings = parse_kernel_log(
                    shape.count(iter_lines(stream)), boot_time=self.boot_time
                )
            self.warnings = [*shape.warnings(self.path), *warnings]
        return self._events

    def commit(self) -> None:
        self._delivered = True
        self.warnings = []
