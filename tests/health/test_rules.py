"""The health rules as pure functions: each fires on its condition and resolves when it clears."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from findings.choices import FindingType as T
from health.choices import Severity
from health.rules import (
    EventFact,
    GpuState,
    Policy,
    evaluate,
    fatal_xid,
    pcie_degraded,
    recovery_action,
    repeated_failure,
    row_remap,
    server_repeated_failure,
    slot_repeated_failure,
    uncorrected_ecc,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
POLICY = Policy()


def event(
    code: int | None = 79,
    *,
    hours_ago: float = 1,
    count: int = 1,
    severity: str = Severity.CRITICAL,
    serial: str = "1650000000001",
    bus: str = "0000:3b:00.0",
    server: int = 1,
    gpu: int | None = 11,
    kind: str = "xid",
) -> EventFact:
    when = NOW - timedelta(hours=hours_ago)
    return EventFact(
        server_id=server,
        hostname=f"dgx-{server:02d}",
        gpu_id=gpu,
        gpu_serial=serial,
        gpu_uuid="",
        pci_bus_id=bus,
        kind=kind,
        code=code,
        severity=severity,
        action="Drain the node and reboot it.",
        count=count,
        first_seen=when,
        last_seen=when,
    )


def state(**changes) -> GpuState:
    base = GpuState(
        gpu_id=11,
        server_id=1,
        hostname="dgx-01",
        index=3,
        uuid="GPU-11",
        serial="1650000000001",
        pci_bus_id="0000:3b:00.0",
        ecc_volatile_uncorrected=0,
        ecc_aggregate_uncorrected=0,
        retired_pages_pending=False,
        remapped_rows_pending=False,
        remapped_rows_failure=False,
        pcie_link_gen_current=5,
        pcie_link_gen_max=5,
        pcie_link_width_current=16,
        pcie_link_width_max=16,
        performance_state=0,
        recovery_action="none",
    )
    return replace(base, **changes)


# -- events ------------------------------------------------------------------------------------


def test_a_fatal_xid_fires_for_its_gpu_and_resolves_after_the_window():
    (finding,) = fatal_xid([event(79, hours_ago=2)], NOW, POLICY)
    assert (finding.type, finding.severity, finding.gpu_id) == (
        T.GPU_FATAL_XID,
        Severity.CRITICAL,
        11,
    )
    assert "Xid 79" in finding.message and finding.message.startswith("dgx-01: GPU 1650000000001")
    assert finding.action == "Drain the node and reboot it."
    assert fatal_xid([event(79, hours_ago=25)], NOW, POLICY) == []


def test_an_application_xid_is_not_fatal():
    assert fatal_xid([event(13, severity=Severity.WARNING)], NOW, POLICY) == []


def test_one_finding_per_gpu_naming_every_fatal_code():
    findings = fatal_xid([event(79), event(48), event(79, serial="other", gpu=12)], NOW, POLICY)
    assert len(findings) == 2
    assert "Xid 48, Xid 79" in findings[1].message or "Xid 48, Xid 79" in findings[0].message


@pytest.mark.parametrize(
    "code, severity, counts, fires",
    [
        (79, Severity.CRITICAL, [1, 1, 1, 1], False),  # four fatal in 24 h: not yet
        (79, Severity.CRITICAL, [1, 1, 1, 1, 1], True),  # the fifth
        (48, Severity.CRITICAL, [5], True),  # five in one episode count too
        (31, Severity.WARNING, [1], False),
        (31, Severity.WARNING, [1, 1], True),  # Xid 31 twice
        (13, Severity.WARNING, [9], False),
        (13, Severity.WARNING, [10], True),
        (43, Severity.INFO, [100], False),  # no threshold for it, not fatal
    ],
)
def test_the_same_gpu_failing_again_within_the_window(code, severity, counts, fires):
    events = [
        event(code, hours_ago=1 + n, count=c, severity=severity) for n, c in enumerate(counts)
    ]
    findings = repeated_failure(events, NOW, POLICY)
    assert bool(findings) is fires
    if fires:
        assert (
            findings[0].type == T.GPU_REPEATED_FAILURE
            and f"{sum(counts)} times" in findings[0].message
        )


def test_repeats_older_than_the_window_resolve_it():
    events = [event(31, hours_ago=30, severity=Severity.WARNING)] * 2
    assert repeated_failure(events, NOW, POLICY) == []


def test_a_slot_whose_gpus_keep_failing_across_replacements():
    first = event(79, hours_ago=24 * 40, serial="AAA", gpu=11)
    second = event(48, hours_ago=24 * 2, serial="BBB", gpu=12)  # the replacement, same slot
    (finding,) = slot_repeated_failure([first, second], NOW, POLICY)
    assert finding.type == T.SLOT_REPEATED_FAILURE and finding.gpu_id is None
    assert finding.subject == f"{T.SLOT_REPEATED_FAILURE}:1:0000:3b:00.0"
    assert finding.details["gpus"] == ["serial:AAA", "serial:BBB"]
    assert slot_repeated_failure([first, replace(second, gpu_serial="AAA")], NOW, POLICY) == []
    older = replace(first, last_seen=NOW - timedelta(days=100))
    assert slot_repeated_failure([older, second], NOW, POLICY) == []


def test_a_server_whose_gpus_keep_failing():
    events = [event(79, serial=f"S{n}", gpu=n, bus=f"0000:{n:02x}:00.0") for n in range(3)]
    (finding,) = server_repeated_failure(events, NOW, POLICY)
    assert finding.type == T.SERVER_REPEATED_FAILURE and "3 different GPUs" in finding.message
    assert server_repeated_failure(events[:2], NOW, POLICY) == []


def test_sxids_do_not_count_against_a_slot_or_a_server():
    events = [
        event(20034, kind="sxid", serial="", gpu=None, bus=f"0000:0{n}:00.0") for n in range(4)
    ]
    assert slot_repeated_failure(events, NOW, POLICY) == []
    assert server_repeated_failure(events, NOW, POLICY) == []


# -- counters ----------------------------------------------------------------------------------


def test_row_remap_failure_is_critical_and_pending_repairs_a_warning():
    assert row_remap([state()]) == []
    (failed,) = row_remap([state(remapped_rows_failure=True, remapped_rows_pending=True)])
    assert (failed.type, failed.severity) == (T.GPU_ROW_REMAP_FAILURE, Severity.CRITICAL)
    assert "RMA" in failed.action
    (pending,) = row_remap([state(remapped_rows_pending=True)])
    assert (pending.type, pending.severity) == (T.GPU_MEMORY_REPAIR_PENDING, Severity.WARNING)
    (pages,) = row_remap([state(retired_pages_pending=True)])
    assert "page retirement" in pages.message


def test_uncorrected_ecc_since_the_driver_loaded_and_resolved_by_a_reset():
    (finding,) = uncorrected_ecc([state(ecc_volatile_uncorrected=3)])
    assert finding.severity == Severity.CRITICAL and "3 uncorrected" in finding.message
    assert uncorrected_ecc([state(ecc_volatile_uncorrected=0, ecc_aggregate_uncorrected=3)]) == []
    (lifetime,) = uncorrected_ecc(
        [state(ecc_volatile_uncorrected=None, ecc_aggregate_uncorrected=3)]
    )
    assert lifetime.severity == Severity.WARNING


@pytest.mark.parametrize(
    "changes, fires",
    [
        ({"pcie_link_width_current": 8}, "x8 of x16"),
        ({"pcie_link_gen_current": 3, "performance_state": 0}, "gen 3 of gen 5 at full load"),
        ({"pcie_link_gen_current": 1, "performance_state": 8}, None),  # idle power saving
        ({"pcie_link_gen_current": 1, "performance_state": None}, None),
        ({}, None),
    ],
)
def test_a_pcie_link_narrower_or_slower_than_its_best(changes, fires):
    findings = pcie_degraded([state(**changes)])
    if fires is None:
        assert findings == []
    else:
        assert fires in findings[0].message and findings[0].type == T.GPU_PCIE_DEGRADED


@pytest.mark.parametrize(
    "action, severity, does",
    [
        ("gpu_reset", Severity.CRITICAL, "reset it"),
        ("drain_and_reset", Severity.CRITICAL, "reset it"),
        ("node_reboot", Severity.CRITICAL, "reboot it"),
        ("drain_p2p", Severity.WARNING, "drain p2p"),
        ("none", None, None),
        ("", None, None),
    ],
)
def test_the_drivers_recovery_action(action, severity, does):
    findings = recovery_action([state(recovery_action=action)])
    if severity is None:
        assert findings == []
    else:
        assert findings[0].severity == severity and does in findings[0].action


def test_evaluate_runs_every_rule_with_stable_distinct_subjects():
    events = [event(79, count=5), event(48, serial="BBB", gpu=12)]
    states = [state(remapped_rows_failure=True, pcie_link_width_current=4)]
    findings = evaluate(states, events, NOW)
    types = sorted(f.type for f in findings)
    assert types == sorted(
        [
            T.GPU_FATAL_XID,
            T.GPU_FATAL_XID,
            T.GPU_REPEATED_FAILURE,
            T.SLOT_REPEATED_FAILURE,
            T.GPU_ROW_REMAP_FAILURE,
            T.GPU_PCIE_DEGRADED,
        ]
    )
    subjects = [f.subject for f in findings]
    assert len(set(subjects)) == len(subjects)
    assert [f.subject for f in evaluate(states, events, NOW)] == subjects
    assert evaluate([state()], [], NOW) == []
