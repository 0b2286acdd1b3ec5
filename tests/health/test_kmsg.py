"""The live kernel-log follower: /dev/kmsg records, a saved position (restart neither loses nor
repeats), overwritten records, the journalctl fallback, and the real /dev/kmsg of this machine."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta

import pytest

from agent import kmsg
from agent.kmsg import KernelLogFollower, Position, parse_record

BOOT = datetime(2025, 2, 23, 16, 0, tzinfo=UTC)
XID = "NVRM: Xid (PCI:0000:3b:00): 13, pid=7, name=train, Graphics Exception"
FALLEN = (
    "NVRM: The NVIDIA GPU 0000:86:00.0\nNVRM: (PCI ID: 10de:2330) installed in this system has\n"
    "NVRM: fallen off the bus and is not responding to commands."
)


class Ring:
    """A kernel ring buffer: records by sequence number; each open reads from its oldest."""

    def __init__(self) -> None:
        self.records: list[tuple[int, bytes]] = []
        self.seq = 0
        self.opened = 0

    def add(self, message: str, *, prio: int = 3, usec: int | None = None) -> int:
        self.seq += 1
        usec = usec if usec is not None else self.seq * 1_000_000
        self.records.append((self.seq, f"{prio},{self.seq},{usec},-;{message}\n".encode()))
        return self.seq

    def wrap(self, keep: int) -> None:
        """The oldest records are overwritten: only the newest `keep` remain."""
        self.records = self.records[-keep:]

    def open(self, path: str) -> Reader:
        self.opened += 1
        return Reader(self)


class Reader:
    def __init__(self, ring: Ring) -> None:
        self.ring = ring
        self.next = ring.records[0][0] if ring.records else 1
        self.overwritten = 0

    def read(self) -> bytes | None:
        for seq, raw in self.ring.records:
            if seq >= self.next:
                self.next = seq + 1
                return raw
        return None

    def close(self) -> None:
        pass


@pytest.fixture
def boot_id(tmp_path):
    path = tmp_path / "boot_id"
    path.write_text("1f0e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\n")
    return path


def follower(ring: Ring, boot_id, state=None, **kwargs) -> KernelLogFollower:
    return KernelLogFollower(
        state_file=state,
        boot_id_path=str(boot_id),
        open_kmsg=ring.open,
        boot_time=BOOT,
        **kwargs,
    )


def test_parse_record_reads_header_message_and_escaped_newlines():
    raw = (
        b"3,4012,2000250000,-;NVRM: The NVIDIA GPU 0000:86:00.0\\x0aNVRM: fallen off the bus\n"
        b" SUBSYSTEM=pci\n DEVICE=+pci:0000:86:00.0\n"
    )
    record = parse_record(raw)
    assert (record.facility, record.seq, record.usec) == (0, 4012, 2000250000)
    assert record.message == "NVRM: The NVIDIA GPU 0000:86:00.0\nNVRM: fallen off the bus"
    assert parse_record(b"garbage without a header") is None
    assert parse_record(b"a,b,c,-;text") is None


def test_first_poll_reads_the_whole_boot_and_keys_events_by_boot_and_sequence(boot_id):
    ring = Ring()
    ring.add("Linux version 6.8.0", prio=5)
    first = ring.add(XID)
    ring.add("usb 1-1: new device", prio=6)
    last = ring.add(XID.replace("Graphics Exception", "again"))
    events = follower(ring, boot_id).poll()
    assert [(e.kind, e.code, e.count) for e in events] == [("xid", 13, 2)]
    boot = boot_id.read_text().strip()
    assert events[0].as_report()["key"] == f"kmsg:{boot}:{first}-{last}"
    assert events[0].time == BOOT + timedelta(seconds=first)


def test_a_restart_neither_loses_nor_repeats_events(boot_id, tmp_path):
    state = tmp_path / "kernel-log.position"
    ring = Ring()
    ring.add(XID)
    agent = follower(ring, boot_id, state)
    assert len(agent.poll()) == 1
    agent.commit()  # delivered
    saved = json.loads(state.read_text())
    assert saved == {
        "boot_id": boot_id.read_text().strip(),
        "cursor": None,
        "seq": 1,
        "source": "kmsg",
    }

    ring.add("NVRM: Xid (PCI:0000:3b:00): 48, pid=7, DBE")
    restarted = follower(ring, boot_id, state)  # a new process: the device read from its start
    events = restarted.poll()
    assert [(e.code, e.count) for e in events] == [(48, 1)]  # the Xid 13 is not sent again
    # killed before the delivery: the next process reads the Xid 48 again, none is lost
    again = follower(ring, boot_id, state).poll()
    assert [(e.code, e.count) for e in again] == [(48, 1)]
    assert again[0].as_report()["key"] == events[0].as_report()["key"]


def test_undelivered_batches_go_with_the_next_report_under_their_own_keys(boot_id):
    ring = Ring()
    ring.add(XID)
    agent = follower(ring, boot_id)
    first = agent.poll()
    ring.add(XID)
    second = agent.poll()  # the first report never arrived: both batches, each keyed apart
    assert [e.count for e in second] == [1, 1]
    assert second[0].as_report()["key"] == first[0].as_report()["key"]
    assert second[1].as_report()["key"] != second[0].as_report()["key"]
    agent.commit()
    assert agent.poll() == []


def test_a_new_boot_reads_its_own_records_from_the_first(boot_id, tmp_path):
    state = tmp_path / "position"
    Position(source="kmsg", boot_id="an-earlier-boot", seq=500).save(state)
    ring = Ring()
    ring.add(XID)  # seq 1 of the new boot: far below the saved 500, still new
    assert len(follower(ring, boot_id, state).poll()) == 1


def test_records_overwritten_before_they_were_read_are_reported(boot_id, tmp_path):
    state = tmp_path / "position"
    ring = Ring()
    ring.add(XID)
    agent = follower(ring, boot_id, state)
    agent.poll()
    agent.commit()
    for _ in range(40):
        ring.add("noise", prio=6)
    ring.add(XID)
    ring.wrap(keep=10)  # 42 records; seq 2..32 are gone
    restarted = follower(ring, boot_id, state)
    assert len(restarted.poll()) == 1
    assert restarted.warnings == [
        "kernel log: 31 records were overwritten before the agent read them"
    ]


def test_messages_written_to_kmsg_from_user_space_are_not_kernel_events(boot_id):
    ring = Ring()
    ring.add(XID, prio=(1 << 3) | 3)  # facility user: someone echoed into /dev/kmsg
    assert follower(ring, boot_id).poll() == []


def test_batches_past_the_report_bound_fold_keeping_the_counts(boot_id, monkeypatch):
    monkeypatch.setattr(kmsg, "MAX_REPORT_EVENTS", 3)
    ring = Ring()
    agent = follower(ring, boot_id)
    for _ in range(4):  # four undelivered batches of the same Xid on the same GPU
        ring.add("NVRM: Xid (PCI:0000:3b:00): 31, pid=1")
        ring.add("NVRM: Xid (PCI:0000:3b:00): 31, pid=2")
        events = agent.poll()
    assert len(events) <= 3
    assert sum(e.count for e in events) == 8
    assert agent.warnings == []


def test_more_distinct_events_than_a_report_holds_are_cut_with_a_warning(boot_id, monkeypatch):
    monkeypatch.setattr(kmsg, "MAX_REPORT_EVENTS", 3)
    ring = Ring()
    for bus in ("19", "3b", "4c", "5d"):
        ring.add(f"NVRM: Xid (PCI:0000:{bus}:00): 31, pid=1")
    agent = follower(ring, boot_id)
    assert [e.pci_bus_id for e in agent.poll()] == ["0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0"]
    assert agent.warnings == ["kernel log: more distinct events than a report holds"]


def test_journalctl_with_a_saved_cursor_where_kmsg_cannot_be_opened(boot_id, tmp_path):
    def no_kmsg(path):
        raise PermissionError(13, "Permission denied")

    entries = [
        {
            "__CURSOR": "s=1;i=1",
            "__REALTIME_TIMESTAMP": "1740326658000000",
            "_BOOT_ID": "b1",
            "__SEQNUM": "10",
            "MESSAGE": XID,
        },
        {
            "__CURSOR": "s=1;i=2",
            "__REALTIME_TIMESTAMP": "1740326659000000",
            "_BOOT_ID": "b1",
            "__SEQNUM": "11",
            "MESSAGE": FALLEN,
        },
    ]
    calls = []

    def runner(argv):
        calls.append(list(argv))
        if "--version" in argv:
            return "systemd 252\n"
        if "--after-cursor" in argv:
            return ""
        return "\n".join(json.dumps(e) for e in entries) + "\n"

    state = tmp_path / "position"
    agent = KernelLogFollower(state_file=state, open_kmsg=no_kmsg, runner=runner)
    events = agent.poll()
    assert [(e.kind, e.pci_bus_id) for e in events] == [
        ("xid", "0000:3b:00.0"),
        ("fallen_off_bus", "0000:86:00.0"),
    ]
    assert events[0].time == datetime.fromtimestamp(1740326658, UTC)
    assert events[0].as_report()["key"] == "journal:b1:10"
    agent.commit()
    assert json.loads(state.read_text())["cursor"] == "s=1;i=2"
    restarted = KernelLogFollower(state_file=state, open_kmsg=no_kmsg, runner=runner)
    assert restarted.poll() == []
    assert calls[-1][-2:] == ["--after-cursor", "s=1;i=2"]


def test_no_kmsg_and_no_journal_is_a_warning_not_a_failure():
    def no_kmsg(path):
        raise FileNotFoundError(2, "No such file or directory")

    agent = KernelLogFollower(open_kmsg=no_kmsg, runner=lambda argv: None)
    assert agent.poll() == []
    assert "kernel log unreadable" in agent.warnings[0]


def test_the_real_dev_kmsg_of_this_machine(tmp_path):
    """The real device: non-blocking reads end at EAGAIN, every record parses, and a second
    process started from the saved position reads nothing it already read."""
    if not os.access(kmsg.KMSG, os.R_OK):
        pytest.skip("/dev/kmsg is not readable here")
    state = tmp_path / "position"
    started = time.monotonic()
    agent = KernelLogFollower(state_file=state)
    agent.poll()
    agent.commit()
    assert time.monotonic() - started < 10
    saved = json.loads(state.read_text())
    assert saved["source"] == "kmsg" and saved["boot_id"] == kmsg.read_boot_id()
    assert isinstance(saved["seq"], int) and saved["seq"] >= 0
    again = KernelLogFollower(state_file=state)
    assert again.poll() == [] or all(
        int(e.key.rsplit(":", 1)[1]) > saved["seq"] for e in again.poll() if e.key
    )
    again.commit()
    assert json.loads(state.read_text())["seq"] >= saved["seq"]
    agent.close()
    again.close()
