"""The kernel log parser: real captured logs, every saved form, storms, several GPUs at once,
the multi-line 'fallen off the bus' message, and bounded memory."""

from __future__ import annotations

import io
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.sources.kernel_log import (
    KernelLogParser,
    SavedKernelLog,
    attach_events,
    iter_lines,
    parse_kernel_log,
)
from tests.agent.conftest import FIXTURES, samples_dir

HEALTH_FIXTURES = FIXTURES / "health"
BOOT = datetime(2025, 2, 23, 16, 0, tzinfo=UTC)
NOW = datetime(2025, 3, 1, tzinfo=UTC)
FORMS = sorted(p.name for p in HEALTH_FIXTURES.glob("*.log"))


def parse_file(path: Path, **kwargs):
    options = {"tz": UTC, "now": NOW, **kwargs}
    with path.open(encoding="utf-8", errors="replace") as stream:
        return parse_kernel_log(iter_lines(stream), **options)


def summary(events):
    return [(e.kind, e.code, e.pci_bus_id, e.count) for e in events]


# -- real captures ---------------------------------------------------------------------------


def test_dmesg_ctime_sample_counts_five_xid_119_on_one_gpu_and_names_it_from_the_log():
    events, warnings = parse_file(samples_dir() / "dmesg-ctime-xid119-gpud.log")
    assert warnings == []
    assert summary(events) == [("xid", 119, "0000:9b:00.0", 5)]
    (event,) = events
    # the log's own "NVRM: GPU at PCI:0000:9b:00: GPU-..." line names the GPU
    assert event.gpu_uuid == "GPU-509665ad-b600-ac93-3616-d754b23d636d"
    assert event.time == datetime(2025, 2, 23, 16, 24, 18, tzinfo=UTC)
    assert event.last_time == datetime(2025, 2, 23, 16, 30, 13, tzinfo=UTC)
    assert event.message.startswith("pid=2024380, name=nvidia-smi, Timeout after 6s")
    report = event.as_report()
    assert (
        report["time"] == "2025-02-23T16:24:18Z" and report["last_time"] == "2025-02-23T16:30:13Z"
    )


def test_dmesg_iso_decode_sample_reads_the_xid_13_burst_and_the_xid_43_after_it():
    events, _ = parse_file(samples_dir() / "dmesg-iso-xid13-gpud.log")
    assert summary(events) == [("xid", 13, "0000:38:00.0", 16), ("xid", 43, "0000:38:00.0", 1)]
    burst = events[0]
    assert burst.time == datetime(2025, 1, 21, 4, 41, 44, 283302, tzinfo=UTC)
    assert burst.last_time == datetime(2025, 1, 21, 4, 41, 44, 285147, tzinfo=UTC)
    assert burst.as_report()["time"] == "2025-01-21T04:41:44.283302Z"
    # the memory lines after the burst (oom-kill, a line cut at the end of the file) are no event
    assert len(events) == 2


def test_samples_are_byte_for_byte_copies_of_the_shared_ones():
    repo = Path(__file__).resolve().parents[2]
    found = [p / "shared" / "samples" for p in (repo.parent, repo.parent.parent)]
    shared = next((p for p in found if p.is_dir()), None)
    if shared is None:
        pytest.skip("no shared samples folder beside this clone")
    for name in (
        "dmesg-ctime-xid119-gpud.log",
        "dmesg-iso-xid13-gpud.log",
        "nvsmi-q-x-rtx4000-ada-v13-health-telegraf.xml",
    ):
        assert (FIXTURES / "samples" / name).read_bytes() == (shared / name).read_bytes()


# -- every saved form ------------------------------------------------------------------------

EXPECTED = [
    ("xid", 79, "0000:3b:00.0", 1),
    ("xid", 13, "0000:5d:00.0", 2),
    ("fallen_off_bus", None, "0000:86:00.0", 1),
    ("probe_failure", None, "0000:86:00.0", 1),
    ("sxid", 12028, "0000:07:00.0", 1),
]


@pytest.mark.parametrize("name", FORMS)
def test_every_log_form_gives_the_same_events(name):
    """dmesg (plain, --ctime, --time-format iso, --decode), journalctl -k (short, -precise,
    -iso, -monotonic, json), rsyslog's kern.log and a saved /dev/kmsg: one set of events."""
    events, warnings = parse_file(HEALTH_FIXTURES / name, boot_time=BOOT)
    assert warnings == []
    assert summary(events) == EXPECTED
    xid79 = events[0]
    assert xid79.gpu_uuid == "GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae"
    # to the second in every form; to the microsecond where the form has them
    assert abs(xid79.time - (BOOT + timedelta(seconds=1843.411020))) < timedelta(seconds=1)
    assert timedelta(0) <= events[1].last_time - events[1].time <= timedelta(seconds=1)


def test_seconds_since_boot_have_no_time_without_a_boot_time():
    events, _ = parse_file(HEALTH_FIXTURES / "dmesg.log")
    assert summary(events) == EXPECTED
    assert all(e.time is None for e in events)
    assert all(e.as_report()["time"] is None for e in events)


def test_year_less_journal_lines_from_december_read_in_january_are_last_year():
    lines = ["Dec 31 23:59:58 dgx-07 kernel: NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE"]
    events, _ = parse_kernel_log(lines, tz=UTC, now=datetime(2026, 1, 1, 0, 5, tzinfo=UTC))
    assert events[0].time == datetime(2025, 12, 31, 23, 59, 58, tzinfo=UTC)


def test_ctime_stamps_are_local_time_of_the_given_zone():
    from datetime import timezone

    plus2 = timezone(timedelta(hours=2))
    lines = ["[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=1, GSP"]
    events, _ = parse_kernel_log(lines, tz=plus2)
    assert events[0].time == datetime(2025, 2, 23, 14, 24, 18, tzinfo=UTC)


# -- storms, several GPUs, bounds -------------------------------------------------------------


def test_a_storm_of_100000_repeats_is_one_event_with_its_count_in_bounded_memory():
    line = (
        "[{:12.6f}] NVRM: Xid (PCI:0000:9b:00): 31, pid=77, name=python, Ch 00000010, "
        "intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f_12345000"
    )
    parser = KernelLogParser(boot_time=BOOT, tz=UTC)
    tracemalloc.start()
    for n in range(100_000):
        parser.feed(line.format(100 + n * 0.001))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    (event,) = parser.result()
    assert (event.kind, event.code, event.count) == ("xid", 31, 100_000)
    assert event.time == BOOT + timedelta(seconds=100)
    assert event.last_time == BOOT + timedelta(seconds=100 + 99_999 * 0.001)
    assert peak < 2 * 1024 * 1024  # nothing grows with the number of lines


def test_interleaved_lines_of_several_gpus_count_per_gpu_and_code():
    buses = ["0000:19:00", "0000:3b:00", "0000:4c:00"]
    lines = []
    for n in range(30):
        bus = buses[n % 3]
        code = 13 if n % 2 else 31
        lines.append(f"[{10 + n:12.6f}] NVRM: Xid (PCI:{bus}): {code}, pid={n}, name=train")
        lines.append(f"[{10 + n:12.6f}] some other driver: unrelated line {n}")
    events, _ = parse_kernel_log(lines, boot_time=BOOT)
    counts = {(e.pci_bus_id, e.code): e.count for e in events}
    assert sum(counts.values()) == 30
    assert counts == {
        ("0000:19:00.0", 31): 5,
        ("0000:19:00.0", 13): 5,
        ("0000:3b:00.0", 13): 5,
        ("0000:3b:00.0", 31): 5,
        ("0000:4c:00.0", 31): 5,
        ("0000:4c:00.0", 13): 5,
    }
    assert events == sorted(events, key=lambda e: e.time)


def test_more_distinct_events_than_the_bound_are_counted_and_said_not_listed():
    lines = [f"[{n:8.3f}] NVRM: Xid (PCI:0000:{n % 256:02x}:00): {n // 256}, x" for n in range(300)]
    parser = KernelLogParser(boot_time=BOOT, max_events=256)
    for line in lines:
        parser.feed(line)
    assert len(parser.result()) == 256 and parser.dropped == 44
    assert "44 lines" in parser.warnings[0]


# -- fallen off the bus, probes, SXids --------------------------------------------------------


def test_fallen_off_the_bus_over_three_lines_without_an_xid_is_one_event():
    lines = [
        "[ 2000.250000] NVRM: The NVIDIA GPU 0000:86:00.0",
        "[ 2000.250000] NVRM: (PCI ID: 10de:2330) installed in this system has",
        "[ 2000.250000] NVRM: fallen off the bus and is not responding to commands.",
    ]
    events, _ = parse_kernel_log(lines, boot_time=BOOT)
    assert summary(events) == [("fallen_off_bus", None, "0000:86:00.0", 1)]
    assert "fallen off the bus" in events[0].message


@pytest.mark.parametrize(
    "line",
    [
        "NVRM: The NVIDIA GPU 0000:05:00.0 installed in this system has fallen off the bus and "
        "is not responding to commands.",
        "NVRM: GPU at 0000:05:00.0 has fallen off the bus.",
        "NVRM: GPU 0000:05:00.0: GPU has fallen off the bus.",
    ],
)
def test_fallen_off_the_bus_one_line_forms(line):
    events, _ = parse_kernel_log([f"[ 12.000000] {line}"])
    assert summary(events) == [("fallen_off_bus", None, "0000:05:00.0", 1)]


def test_the_fallen_line_after_an_xid_79_is_that_xids_second_line_not_another_event():
    lines = [
        "[ 1.0] NVRM: Xid (PCI:0000:2b:00): 79, pid=1, GPU has fallen off the bus.",
        "[ 1.0] NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.",
    ]
    events, _ = parse_kernel_log(lines)
    assert summary(events) == [("xid", 79, "0000:2b:00.0", 1)]


def test_the_pending_gpu_of_a_multi_line_message_expires():
    lines = ["[ 1.0] NVRM: The NVIDIA GPU 0000:86:00.0", *(f"[ 1.0] line {n}" for n in range(6))]
    lines.append("[ 2.0] NVRM: something about fallen off the bus elsewhere")
    events, _ = parse_kernel_log(lines)
    assert summary(events) == [("fallen_off_bus", None, None, 1)]


@pytest.mark.parametrize(
    "line, bus",
    [
        ("nvidia 0000:d1:00.0: probe with driver nvidia failed with error -1", "0000:d1:00.0"),
        ("nvidia: probe of 0000:d1:00.0 failed with error -1", "0000:d1:00.0"),
        ("NVRM: GPU 0000:d1:00.0: RmInitAdapter failed! (0x26:0x56:1474)", "0000:d1:00.0"),
        ("NVRM: RmInitAdapter failed! (0x31:0x40:2588)", None),
    ],
)
def test_probe_and_init_failures(line, bus):
    events, _ = parse_kernel_log([f"[ 5.0] {line}"])
    assert summary(events) == [("probe_failure", None, bus, 1)]


def test_sxid_detail_lines_belong_to_their_sxid():
    events, _ = parse_file(HEALTH_FIXTURES / "dmesg.log", boot_time=BOOT)
    sxid = next(e for e in events if e.kind == "sxid")
    assert sxid.count == 1 and sxid.message.startswith("Non-fatal, Link 32")
    assert sxid.gpu_uuid is None  # an SXid's bus is an NVSwitch, never a GPU


# -- reading and attaching ---------------------------------------------------------------------


def test_lines_lose_bom_and_crlf_and_an_overlong_line_is_cut():
    text = (
        "\ufeff[ 1.0] NVRM: Xid (PCI:0000:3b:00): 13, a\r\n"
        + "x" * 200_000
        + "\n[ 2.0] NVRM: Xid (PCI:0000:3b:00): 13, b\n"
    )
    lines = list(iter_lines(io.StringIO(text), limit=1000))
    assert lines[0] == "[ 1.0] NVRM: Xid (PCI:0000:3b:00): 13, a"
    assert len(lines) == 3 and len(lines[1]) == 1000
    events, _ = parse_kernel_log(lines)
    assert summary(events) == [("xid", 13, "0000:3b:00.0", 2)]


def test_attach_names_each_gpu_by_the_reports_bus_and_keeps_schema_bounds(validate_report):
    from simulator.profiles import build
    from simulator.reports import simulate_report

    report = simulate_report(build("h100", seed=3, hostname="dgx-health"))
    gpu = report["gpus"][2]
    bus = gpu["pci_bus_id"][:-2]
    lines = [
        f"[ 1.0] NVRM: Xid (PCI:{bus}): 48, pid=1, DBE",
        "[ 2.0] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 30 LTSSM Fault Up",
    ]
    events, _ = parse_kernel_log(lines, boot_time=BOOT)
    attach_events(report, events, ["a warning"])
    assert report["events"][0]["gpu_uuid"] == gpu["uuid"]
    assert report["events"][1]["gpu_uuid"] is None
    assert report["warnings"][-1] == "a warning"
    validate_report(report)


def test_a_saved_log_goes_with_one_delivered_report_only(tmp_path):
    log = tmp_path / "dmesg.log"
    log.write_text("[ 1.0] NVRM: Xid (PCI:0000:3b:00): 13, a\n")
    source = SavedKernelLog(str(log), boot_time=BOOT)
    assert len(source.poll()) == 1 and len(source.poll()) == 1  # not delivered yet: again
    source.commit()
    assert source.poll() == []


def test_the_host_and_kernel_tag_of_journal_lines_stay_out_of_the_message():
    for name in ("journalctl-k.log", "journalctl-k-short-monotonic.log", "kern.log"):
        events, _ = parse_file(HEALTH_FIXTURES / name, boot_time=BOOT)
        fallen = next(e for e in events if e.kind == "fallen_off_bus")
        assert fallen.message.startswith("NVRM: ") and "dgx-07" not in fallen.message, name


@pytest.mark.parametrize(
    "stamp",
    [
        "Teb 23 16:33:20 dgx-07 kernel: ",  # a month no calendar has
        "[99999999999999999999.000000] ",  # seconds since boot no boot lasts
        "6,1234,99999999999999999999999,-;",  # the same in a saved /dev/kmsg
        "Feb 30 16:33:20 dgx-07 kernel: ",  # no such day
    ],
)
def test_a_corrupted_stamp_leaves_the_event_without_a_time_and_the_log_is_read_on(stamp):
    """A damaged line in a saved log (or a disk that flipped bits) costs its own time only:
    the event is kept, and the lines after it are read."""
    xid48 = "NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=train, DBE"
    later = "[ 1843.411020] NVRM: Xid (PCI:0000:5d:00): 13, pid=2, name=train, Graphics Exception"
    events, _ = parse_kernel_log([stamp + xid48, later], tz=UTC, now=NOW, boot_time=BOOT)
    assert sorted((e.code, e.time) for e in events if e.code == 48) == [(48, None)]
    assert [e.time for e in events if e.code == 13] == [BOOT + timedelta(seconds=1843.41102)]
