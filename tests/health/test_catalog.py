"""The XID catalog: data in the repo with its source named; severity and action per event."""

from __future__ import annotations

import pytest

from health.catalog import catalog_source, event_info, xid_codes, xid_info
from health.choices import Severity


def test_the_catalog_names_its_source_and_the_day_it_was_read():
    source = catalog_source()
    assert source["url"] == "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
    assert source["read_on"] == "2026-11-30"
    assert "NVIDIA" in source["title"]


def test_every_catalogued_code_has_a_meaning_a_severity_and_an_action():
    codes = xid_codes()
    assert len(codes) > 100 and {13, 31, 48, 63, 64, 74, 79, 92, 94, 95, 119, 154} <= set(codes)
    for code in codes:
        info = xid_info(code)
        assert info.meaning and info.action
        assert info.severity in Severity.values


@pytest.mark.parametrize(
    "code, severity, action",
    [
        (79, Severity.CRITICAL, "reboot"),  # fallen off the bus: RESTART_BM
        (48, Severity.CRITICAL, "remapped"),  # double-bit ECC: NVIDIA's Xid 48 workflow
        (95, Severity.CRITICAL, "reset"),  # uncontained memory error
        (119, Severity.CRITICAL, "reset"),  # GSP RPC timeout
        (74, Severity.CRITICAL, "NVLink"),
        (13, Severity.WARNING, "Restart the application"),
        (31, Severity.WARNING, "Restart the application"),
        (94, Severity.WARNING, "Restart the application"),  # contained: the app, not the GPU
        (63, Severity.INFO, "No action"),  # a row remapped as designed
        (165, Severity.CRITICAL, "Drain"),  # no action in the catalog: our reading, critical
    ],
)
def test_severity_and_action_follow_nvidias_immediate_action(code, severity, action):
    info = xid_info(code)
    assert info.severity == severity and action in info.action


def test_a_code_outside_the_catalog_is_a_warning_that_says_so():
    info = xid_info(4242)
    assert info.severity == Severity.WARNING and "Not in NVIDIA's Xid catalog" in info.action


def test_other_kinds():
    assert event_info("sxid", 20034, "Fatal, Link 30 LTSSM Fault Up").severity == Severity.CRITICAL
    assert event_info("sxid", 12028, "Non-fatal, Link 32").severity == Severity.WARNING
    assert event_info("fallen_off_bus", None).severity == Severity.CRITICAL
    assert "initialise" in event_info("probe_failure", None).action
