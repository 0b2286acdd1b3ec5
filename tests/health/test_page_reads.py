"""The reads behind /health/: events per day by code (the figure), repeat offenders ranked
(GPU, slot, server), and totals by GPU model and by rack, on stored events of known days."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count

import pytest

from core.palette import CRITICAL, WARNING, tone_colour
from health.catalog import xid_info
from health.models import HealthEvent
from health.selectors import events_by, events_figure, health_overview, repeat_offenders
from inventory.models import Gpu, Server

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
_keys = count()


def _day(days_ago: int) -> str:
    return (NOW - timedelta(days=days_ago)).date().isoformat()


def _server(hostname: str, rack: str, model: str = "NVIDIA H100 80GB HBM3") -> Server:
    server = Server.objects.create(identity=f"hostname:{hostname}", hostname=hostname, rack=rack)
    Gpu.objects.bulk_create(
        Gpu(
            server=server,
            index=i,
            uuid=f"GPU-{hostname}-{i}",
            serial=f"{hostname}-sn{i}",
            name=model,
            pci_bus_id=f"0000:{0x18 + 0x10 * i:02x}:00.0",
        )
        for i in range(2)
    )
    return server


def _event(
    server: Server,
    gpu_index: int | None,
    code: int,
    days_ago: float,
    *,
    n: int = 1,
    kind: str = "xid",
    severity: str | None = None,
) -> HealthEvent:
    gpu = server.gpus.get(index=gpu_index) if gpu_index is not None else None
    seen = NOW - timedelta(days=days_ago)
    return HealthEvent.objects.create(
        server=server,
        gpu=gpu,
        gpu_serial=gpu.serial if gpu else "",
        gpu_uuid=gpu.uuid if gpu else "",
        pci_bus_id=gpu.pci_bus_id if gpu else "",
        kind=kind,
        code=code,
        severity=severity or xid_info(code).severity,
        first_seen=seen,
        last_seen=seen,
        count=n,
        dedupe_key=f"k{next(_keys)}",
    )


@pytest.fixture
def fleet() -> None:
    a = _server("dgx-a", "r01")
    b = _server("dgx-b", "r01")
    c = _server("l40-c", "r02", model="NVIDIA L40S")
    # dgx-a GPU 0: three failure episodes; GPU 1: two; dgx-b GPU 0: one long burst
    for days_ago in (3, 1, 1):
        _event(a, 0, 79, days_ago)
    _event(a, 1, 48, 2)
    _event(a, 1, 13, 1, n=16)
    _event(b, 0, 31, 1, n=50)
    _event(c, None, 12028, 2, kind="sxid", severity="warning")  # an NVSwitch: no GPU, no slot
    _event(c, 0, 999_999, 1, severity="info")  # information is no failure
    _event(b, 1, 79, 40)  # outside every window


@pytest.mark.usefixtures("fleet")
def test_the_events_figure_stacks_each_codes_events_per_day_with_its_meaning():
    figure = events_figure(now=NOW, days=30)
    traces = {t["name"]: t for t in figure["data"]}

    assert figure["layout"]["barmode"] == "stack"
    per_day = {name: dict(zip(t["x"], t["y"], strict=True)) for name, t in traces.items()}
    assert per_day == {
        "Xid 13": {_day(1): 16},
        "Xid 31": {_day(1): 50},
        "Xid 48": {_day(2): 1},
        "Xid 79": {_day(3): 1, _day(1): 2},  # the one of 40 days ago is out of the window
        "Xid 999999": {_day(1): 1},
        "NVSwitch SXid 12028": {_day(2): 1},
    }
    fatal = traces["Xid 79"]
    assert fatal["marker"]["color"] == tone_colour(CRITICAL)
    assert traces["Xid 13"]["marker"]["color"] == tone_colour(WARNING)
    assert xid_info(79).meaning.replace("'", "&#x27;")[:20] in fatal["hovertemplate"]
    assert set(per_day) - {t["name"] for t in events_figure(now=NOW, days=1)["data"]} == {
        "Xid 48",
        "NVSwitch SXid 12028",
    }


@pytest.mark.usefixtures("fleet")
def test_repeat_offenders_are_ranked_by_episodes_then_events():
    since = NOW - timedelta(days=7)

    gpus = repeat_offenders(since=since, by="gpus")
    assert [(r["gpu_serial"], r["episodes"], r["events"]) for r in gpus] == [
        ("dgx-a-sn0", 3, 3),
        ("dgx-a-sn1", 2, 17),
        ("dgx-b-sn0", 1, 50),
    ]
    slots = repeat_offenders(since=since, by="slots")
    assert [(r["server__hostname"], r["pci_bus_id"]) for r in slots] == [
        ("dgx-a", "0000:18:00.0"),
        ("dgx-a", "0000:28:00.0"),
        ("dgx-b", "0000:18:00.0"),
    ]
    servers = repeat_offenders(since=since, by="servers")
    assert [(r["server__hostname"], r["episodes"]) for r in servers] == [
        ("dgx-a", 5),
        ("dgx-b", 1),
        ("l40-c", 1),  # its SXid; its information event is left out
    ]
    assert repeat_offenders(since=NOW - timedelta(days=1, hours=1), by="gpus")[0]["events"] == 2


@pytest.mark.usefixtures("fleet")
def test_events_by_gpu_model_and_by_rack():
    since = NOW - timedelta(days=7)

    by_model = {
        r["group"]: (r["episodes"], r["events"]) for r in events_by(since=since, key="gpu__name")
    }
    assert by_model == {
        "NVIDIA H100 80GB HBM3": (6, 70),
        "NVIDIA L40S": (1, 1),
        None: (1, 1),  # the NVSwitch's event has no GPU
    }
    by_rack = {r["group"]: r["episodes"] for r in events_by(since=since, key="server__rack")}
    assert by_rack == {"r01": 6, "r02": 2}


@pytest.mark.usefixtures("fleet")
def test_the_overviews_events_of_the_last_day_and_week():
    critical = {code for code in (79, 48, 13, 31) if xid_info(code).severity == "critical"}
    assert 79 in critical and 13 not in critical  # what the sums below rely on
    day_critical = 2 * (79 in critical) + (31 in critical)
    week_critical = day_critical + (79 in critical) + (48 in critical)

    day, week = health_overview(now=NOW)["events"]

    assert day == {
        "window": "last day",
        "episodes": 5,
        "events": 2 + 16 + 50 + 1,
        "critical": day_critical,
    }
    assert week == {
        "window": "last week",
        "episodes": 8,
        "events": 69 + 3,
        "critical": week_critical,
    }
