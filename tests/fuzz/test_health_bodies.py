"""Hypothesis fuzzer for what health reads from a report: its `events` and each GPU's `health`
counters. One value broken at a time (a number beyond any column, NaN, NUL, a lone surrogate,
a wrong type, a time out of range). The report is a 202 or a 400, never a 5xx; a 202 is never
followed by a failure, in the report's application or in the health sweep that records it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from health.services import health_findings_sync, health_sweep
from inventory.choices import ReportStatus
from inventory.models import Report
from tests.health.fleet import server_report, xid

from .conftest import TALLY
from .test_bodies import ANY_VALUE, FUZZ, _at, _paths

pytestmark = [pytest.mark.django_db, pytest.mark.fuzz]

TIMES = st.sampled_from(
    [
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "2026-02-30T00:00:00Z",
        "2026-11-30T08:00:00+25:00",
        "2026-11-30T08:00:00",
        "yesterday",
        "",
    ]
)


def _base() -> dict[str, Any]:
    report = server_report("fuzz-health", gpus=2)
    bus = report["gpus"][1]["pci_bus_id"]
    report["events"] = [
        xid(79, bus, "2026-11-30T08:00:00Z", uuid=report["gpus"][1]["uuid"], key="b1:1"),
        xid(13, bus, "2026-11-30T08:00:01Z", count=16, last="2026-11-30T08:00:02Z", key="b1:2"),
        xid(12028, "0000:05:00.0", "2026-11-30T09:00:00Z", kind="sxid", message="Non-fatal"),
        {**xid(0, bus, "2026-11-30T09:00:00Z", kind="fallen_off_bus"), "code": None},
    ]
    report["gpus"][0]["health"]["ecc_locations"] = [
        {"location": "dram", "counter": "volatile", "corrected": 1, "uncorrected": 0}
    ]
    return report


BASE = _base()
HEALTH_PATHS = [p for p in _paths(BASE) if p[0] == "events" or "health" in p]


@st.composite
def health_bodies(draw) -> bytes:
    document = copy.deepcopy(BASE)
    path = draw(st.sampled_from(HEALTH_PATHS))
    value = draw(TIMES) if path[-1] in ("time", "last_time") and draw(st.booleans()) else None
    _at(document, path[:-1])[path[-1]] = value if value is not None else draw(ANY_VALUE)
    return json.dumps(document).encode("utf-8", "surrogatepass")


@given(body=health_bodies())
@FUZZ
def test_health_parts_of_a_report_never_get_a_5xx_nor_a_202_that_fails_later(post_report, body):
    from inventory.models import AgentToken
    from inventory.services import agent_token_create

    AgentToken.objects.update(identity=None)  # the server is free again for a new token
    key = agent_token_create(name="fuzz-health")[1]
    response = post_report(body, key)
    TALLY["health report bodies"] += 1
    assert response.status_code in (202, 400), (response.status_code, body[:300])
    if response.status_code == 400:
        assert response.json()["errors"], response.content
        return
    TALLY["health report bodies accepted"] += 1
    report = Report.objects.get(pk=response.json()["id"])
    assert report.status != ReportStatus.FAILED, report.error
    health_sweep()  # records every applied report's events and counters: never raises
    health_findings_sync()
