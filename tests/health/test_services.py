"""Recording health: events stored once and counted, episodes, counters as changes, the sweep
that follows applied reports, and the heartbeat left intact."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from health.choices import Severity
from health.models import GpuCounterSample, HealthCursor, HealthEvent, HealthEventReceipt
from health.services import (
    ReportHealth,
    health_prune,
    health_record,
    health_record_reports,
    health_sweep,
)
from inventory.choices import GpuStatus, ReportStatus
from inventory.models import Gpu, Report, Server
from inventory.services.ingest import ReportRejected
from tests.reports import gpu_uuid

from .fleet import Agent, healthy, server_report, with_events, xid

pytestmark = pytest.mark.django_db

T0 = "2026-11-30T08:00:00Z"
BUS2 = "0000:38:00.0"  # make_report puts GPU i at 0x18 + 0x10 * i


def test_events_become_episodes_with_the_catalogs_severity_and_action():
    agent = Agent("dgx-01")
    report = with_events(
        server_report("dgx-01"),
        xid(79, BUS2, T0, uuid=gpu_uuid("dgx-01", 2), message="GPU has fallen off the bus."),
        xid(13, BUS2, T0, count=16, last="2026-11-30T08:00:01.5Z", uuid=gpu_uuid("dgx-01", 2)),
    )
    agent.send(report)
    assert health_sweep() == 1
    gpu = Gpu.objects.get(uuid=gpu_uuid("dgx-01", 2))
    fatal = HealthEvent.objects.get(code=79)
    assert (fatal.severity, fatal.gpu_id, fatal.gpu_serial) == (
        Severity.CRITICAL,
        gpu.pk,
        gpu.serial,
    )
    assert fatal.action.startswith("Drain the node and reboot it")
    assert fatal.pci_bus_id == BUS2 and fatal.count == 1
    burst = HealthEvent.objects.get(code=13)
    assert burst.severity == Severity.WARNING and burst.count == 16
    assert burst.last_seen - burst.first_seen == timedelta(seconds=1.5)
    assert health_sweep() == 0  # nothing new: the cursor moved past it


def test_a_batch_the_agent_sends_twice_is_counted_once():
    agent = Agent("dgx-01")
    key = "kmsg:boot-1:100-180"
    report = with_events(server_report("dgx-01"), xid(13, BUS2, T0, count=40, key=key))
    first = agent.send(report)
    second = agent.send(report)  # the delivery timed out after the backend had stored it
    assert (first.status, second.status) == ("pending", "applied")  # nothing new to apply
    assert first.report_id != second.report_id
    health_sweep()
    assert HealthEvent.objects.get().count == 40
    assert HealthEventReceipt.objects.count() == 1


def test_events_without_a_key_are_recognised_by_their_content():
    agent = Agent("dgx-01")
    report = with_events(server_report("dgx-01"), xid(31, BUS2, T0, count=3))
    agent.send(report)
    agent.send(report)  # `collect --kernel-log` of the same file, pushed twice
    health_sweep()
    assert HealthEvent.objects.get().count == 3


def test_repeats_in_later_reports_extend_the_episode_and_a_quiet_gap_starts_another(settings):
    settings.ATLAS_HEALTH_EPISODE_GAP_S = 3600
    agent = Agent("dgx-01")
    base = server_report("dgx-01")
    agent.send(with_events(base, xid(31, BUS2, "2026-11-30T08:00:00Z", key="k:1")))
    agent.send(with_events(base, xid(31, BUS2, "2026-11-30T08:30:00Z", count=2, key="k:2")))
    agent.send(with_events(base, xid(31, BUS2, "2026-11-30T11:00:00Z", key="k:3")))
    health_sweep()
    episodes = list(HealthEvent.objects.order_by("first_seen").values_list("count", "last_seen"))
    assert [count for count, _ in episodes] == [3, 1]
    assert episodes[0][1].isoformat() == "2026-11-30T08:30:00+00:00"


def test_an_old_event_seen_again_after_a_newer_episode_extends_its_own_and_the_sweep_goes_on(
    settings,
):
    """A saved kernel log read again (its events keyless, one count grown) names an episode
    older than the newest of its GPU and code: it extends that one. Creating it twice broke
    the unique key, and the sweep, which cannot pass a report it fails on, stopped for all."""
    settings.ATLAS_HEALTH_EPISODE_GAP_S = 3600
    agent = Agent("dgx-01")
    base = server_report("dgx-01")
    agent.send(with_events(base, xid(79, BUS2, "2026-11-30T08:00:00Z")))
    agent.send(with_events(base, xid(79, BUS2, "2026-11-30T15:00:00Z")))
    assert health_sweep() == 2

    agent.send(with_events(base, xid(79, BUS2, "2026-11-30T08:00:00Z", count=2)))
    agent.send(with_events(base, xid(13, BUS2, "2026-11-30T16:00:00Z")))
    assert health_sweep() == 2

    episodes = HealthEvent.objects.order_by("first_seen", "code")
    assert [(e.code, e.first_seen.hour, e.count) for e in episodes] == [
        (79, 8, 3),
        (79, 15, 1),
        (13, 16, 1),
    ]


def test_a_gpu_fallen_off_the_bus_is_attached_to_the_gpu_that_sat_in_that_slot():
    agent = Agent("dgx-01")
    agent.send(server_report("dgx-01"))
    lost_uuid = gpu_uuid("dgx-01", 2)
    report = server_report("dgx-01", skip_gpus=(2,))
    report["pci_gpus"].append({"pci_bus_id": BUS2, "driver": "nvidia", "in_nvml": False})
    agent.send(with_events(report, xid(None, BUS2, T0, kind="fallen_off_bus", message="fell")))
    health_sweep()
    event = HealthEvent.objects.get()
    lost = Gpu.objects.get(uuid=lost_uuid)
    assert lost.status == GpuStatus.LOST
    assert event.gpu_id == lost.pk and event.gpu_serial == lost.serial
    assert event.kind == "fallen_off_bus" and event.severity == Severity.CRITICAL


def test_an_sxid_is_an_event_of_the_server_with_the_severity_its_line_states():
    agent = Agent("dgx-01")
    agent.send(
        with_events(
            server_report("dgx-01"),
            xid(20034, "0000:05:00.0", T0, kind="sxid", message="Fatal, Link 30 LTSSM Fault Up"),
            xid(12028, "0000:06:00.0", T0, kind="sxid", message="Non-fatal, Link 32 egress"),
        )
    )
    health_sweep()
    fatal, nonfatal = HealthEvent.objects.order_by("-code")
    assert fatal.gpu_id is None and fatal.severity == Severity.CRITICAL
    assert nonfatal.severity == Severity.WARNING


def test_event_times_in_the_future_are_a_wrong_clock_and_take_the_receipt_time():
    agent = Agent("dgx-01")
    agent.send(with_events(server_report("dgx-01"), xid(13, BUS2, "2099-01-01T00:00:00Z")))
    health_sweep()
    event = HealthEvent.objects.get()
    assert event.first_seen == Report.objects.get().received_at


@pytest.mark.parametrize(
    "time",
    [
        "2026-02-30T08:00:00Z",
        "0001-01-01T00:00:00Z",
        "1969-12-31T23:59:59Z",
        "2026-11-30T08:00:00+25:00",
    ],
)
def test_event_times_that_cannot_be_take_the_receipt_time_and_the_sweep_goes_on(time):
    """No such day, before 1970 (and past the dates a window can go back from): the schema's
    pattern lets them by, and a sweep that failed on them would stop for every server."""
    agent = Agent("dgx-01")
    try:
        agent.send(with_events(server_report("dgx-01"), xid(13, BUS2, time, last=time)))
    except ReportRejected:
        pytest.skip("refused at the door: nothing reaches the sweep")
    agent.send(with_events(server_report("dgx-01"), xid(31, BUS2, T0)))
    assert health_sweep() == 2
    event = HealthEvent.objects.get(code=13)
    assert event.first_seen == event.last_seen == Report.objects.order_by("id")[0].received_at
    assert HealthEvent.objects.filter(code=31).exists()


def test_a_report_the_sweep_cannot_record_is_logged_and_the_others_are_recorded(
    monkeypatch, caplog
):
    """Whatever the next such bug is, one report must not stop health for the whole fleet."""
    from health import services

    good, bad = Agent("dgx-01"), Agent("dgx-02")
    good.send(with_events(server_report("dgx-01"), xid(31, BUS2, T0)))
    bad.send(with_events(server_report("dgx-02"), xid(79, BUS2, T0)))
    good.send(with_events(server_report("dgx-01"), xid(13, BUS2, T0)))
    poison = Report.objects.get(server__hostname="dgx-02").pk
    record = services.health_record_reports

    def failing(*, reports, now=None):
        if any(r.report_id == poison for r in reports):
            HealthEvent.objects.create(dedupe_key="half-written", **_half_written())
            raise RuntimeError("a bug in recording")
        return record(reports=reports, now=now)

    monkeypatch.setattr(services, "health_record_reports", failing)
    assert health_sweep() == 3
    assert sorted(HealthEvent.objects.values_list("code", flat=True)) == [13, 31]
    assert f"report {poison} not recorded" in caplog.text
    assert health_sweep() == 0  # past it for good


def _half_written() -> dict:
    server = Server.objects.get(hostname="dgx-02")
    now = timezone.now()
    return {"server": server, "kind": "xid", "code": 1, "severity": "info"} | {
        "first_seen": now,
        "last_seen": now,
    }


# -- counters ----------------------------------------------------------------------------------


def test_counters_are_kept_as_changes_not_overwritten():
    agent = Agent("dgx-01")
    report = server_report("dgx-01")
    agent.send(report)
    health_sweep()
    assert GpuCounterSample.objects.filter(current=True).count() == 8

    busy = copy.deepcopy(report)  # load: P-state and link generation move, no counter does
    for gpu in busy["gpus"]:
        gpu["health"].update(performance_state=0, clock_event_reasons=["sw_power_cap"])
    agent.send(busy)
    health_sweep()
    assert GpuCounterSample.objects.count() == 8
    sample = GpuCounterSample.objects.get(gpu__uuid=gpu_uuid("dgx-01", 0))
    assert sample.performance_state == 0 and sample.clock_event_reasons == ["sw_power_cap"]

    worse = copy.deepcopy(busy)
    worse["gpus"][0]["ecc_errors_corrected"] = 12
    worse["gpus"][0]["health"]["ecc_volatile_corrected"] = 12
    agent.send(worse)
    health_sweep()
    history = list(
        GpuCounterSample.objects.filter(gpu__uuid=gpu_uuid("dgx-01", 0)).order_by("taken_at", "id")
    )
    assert [(s.ecc_aggregate_corrected, s.current) for s in history] == [(0, False), (12, True)]
    assert GpuCounterSample.objects.count() == 9


def test_a_gpu_that_moves_gets_a_sample_on_its_new_server():
    a, b = Agent("dgx-a"), Agent("dgx-b")
    report_a = server_report("dgx-a")
    moving = copy.deepcopy(report_a["gpus"][5])
    a.send(report_a)
    a.send(server_report("dgx-a", skip_gpus=(5,)))
    report_b = server_report("dgx-b", gpus=2)
    moving["index"] = 2
    moving["pci_bus_id"] = "0000:cb:00.0"
    report_b["gpus"].append(moving)
    b.send(report_b)
    health_sweep()
    samples = list(
        GpuCounterSample.objects.filter(gpu__uuid=moving["uuid"]).order_by("taken_at", "id")
    )
    hosts = [s.server.hostname for s in samples]
    assert hosts == ["dgx-a", "dgx-b"] and samples[-1].pci_bus_id == "0000:cb:00.0"


def test_reports_from_agents_without_health_objects_still_keep_lifetime_counters():
    agent = Agent("dgx-old")
    report = server_report("dgx-old")
    for gpu in report["gpus"]:
        del gpu["health"]
    del report["events"]
    agent.send(report)
    health_sweep()
    sample = GpuCounterSample.objects.first()
    assert sample.ecc_aggregate_corrected == 0 and sample.recovery_action == ""
    assert sample.pcie_link_width_current is None


# -- the sweep -----------------------------------------------------------------------------------


def test_the_sweep_waits_at_a_pending_report_and_skips_none():
    early, late = Agent("dgx-early"), Agent("dgx-late")
    early.send(with_events(server_report("dgx-early"), xid(48, BUS2, T0)), apply=False)
    late.send(with_events(server_report("dgx-late"), xid(48, BUS2, T0)))
    assert health_sweep() == 0  # the earlier report is still pending: wait
    assert not HealthEvent.objects.exists()
    from inventory.services import report_apply

    report_apply(report_id=Report.objects.get(server__isnull=True).pk)
    assert health_sweep() == 2
    assert sorted(HealthEvent.objects.values_list("server__hostname", flat=True)) == [
        "dgx-early",
        "dgx-late",
    ]
    assert HealthCursor.objects.get().report_id == Report.objects.order_by("-id")[0].pk


def test_a_superseded_report_gives_its_events_but_not_its_older_counters():
    agent = Agent("dgx-01")
    agent.send(server_report("dgx-01"))
    old = with_events(server_report("dgx-01"), xid(94, BUS2, T0))
    old["gpus"][0]["ecc_errors_corrected"] = 99  # stale: a newer report was applied first
    old_result = agent.send(old, apply=False)
    agent.send(with_events(server_report("dgx-01"), xid(13, BUS2, T0)))
    from inventory.services import report_apply

    assert report_apply(report_id=old_result.report_id).status == ReportStatus.SUPERSEDED
    health_sweep()
    assert sorted(HealthEvent.objects.values_list("code", flat=True)) == [13, 94]
    assert not GpuCounterSample.objects.filter(ecc_aggregate_corrected=99).exists()


def test_a_report_with_events_is_never_a_heartbeat_and_the_next_without_them_is_one():
    agent = Agent("dgx-01")
    report = server_report("dgx-01")
    assert agent.send(report).status == "pending"
    assert agent.send(report).status == "unchanged"
    with CaptureQueriesContext(connection) as queries:
        stored = agent.send(with_events(report, xid(13, BUS2, T0)))
    # the same facts: stored for its events, with nothing to apply (no GPU or link upserts)
    assert stored.status == "applied"
    assert not any("inventory_gpu" in q["sql"] for q in queries.captured_queries)
    assert Server.objects.get().last_report_id == stored.report_id
    assert agent.send(report).status == "unchanged"  # events are no server fact
    assert Report.objects.count() == 2
    health_sweep()
    assert HealthEvent.objects.get().code == 13


def test_posting_a_report_records_its_events_at_once_where_tasks_run_in_process(post_report):
    from inventory.services import agent_token_create

    _, key = agent_token_create(name="api")
    response = post_report(with_events(server_report("dgx-api"), xid(79, BUS2, T0)), key)
    assert response.status_code == 202, response.content
    assert HealthEvent.objects.filter(code=79, server__hostname="dgx-api").exists()


def test_recording_many_reports_costs_the_same_queries_as_few():
    def reports(n: int, offset: int) -> list[ReportHealth]:
        out = []
        for i in range(n):
            name = f"dgx-{offset + i}"
            agent = Agent(name)
            result = agent.send(server_report(name))
            payload = Report.objects.get(pk=result.report_id).payload
            out.append(
                ReportHealth(
                    report_id=result.report_id,
                    server_id=Server.objects.get(hostname=name).pk,
                    received_at=timezone.now(),
                    gpus=payload["gpus"],
                    events=[xid(13, BUS2, T0, uuid=gpu_uuid(name, 2), key=f"k:{name}")],
                )
            )
        return out

    few, many = reports(2, 0), reports(20, 100)
    with CaptureQueriesContext(connection) as small:
        health_record_reports(reports=few)
    with CaptureQueriesContext(connection) as large:
        health_record_reports(reports=many)

    def reads(queries) -> int:  # inserts come in batches (SQLite: ~35 rows of 28 fields each)
        return sum(1 for q in queries.captured_queries if not q["sql"].startswith("INSERT"))

    assert reads(large) == reads(small)
    inserts = len(large) - reads(large)
    assert inserts <= 3 + (20 * 8) // 30  # never one per row
    assert HealthEvent.objects.count() == 22 and GpuCounterSample.objects.count() == 22 * 8


def test_health_record_of_one_report_and_recording_twice_is_once():
    agent = Agent("dgx-01")
    result = agent.send(with_events(server_report("dgx-01"), xid(13, BUS2, T0, key="k")))
    report = Report.objects.get(pk=result.report_id)
    server = Server.objects.get()
    health_record(server=server, report=report)
    health_record(server=server, report=report)
    assert HealthEvent.objects.get().count == 1
    assert GpuCounterSample.objects.count() == 8


def test_prune_forgets_old_receipts_events_and_counter_history(settings):
    settings.ATLAS_HEALTH_RECEIPT_DAYS = 30
    settings.ATLAS_HEALTH_RETENTION_DAYS = 365
    agent = Agent("dgx-01")
    agent.send(with_events(server_report("dgx-01"), xid(13, BUS2, T0, key="k")))
    changed = server_report("dgx-01")
    changed["gpus"][0]["health"] = healthy(pcie_replay_count=5)
    agent.send(changed)
    health_sweep()
    later = timezone.now() + timedelta(days=400)
    HealthEvent.objects.update(last_seen=later - timedelta(days=366))
    GpuCounterSample.objects.filter(current=False).update(taken_at=later - timedelta(days=366))
    counts = health_prune(now=later)
    assert counts == {"receipts": 1, "events": 1, "samples": 1}
    assert GpuCounterSample.objects.filter(current=True).count() == 8  # the present stays


def test_bad_events_of_an_unchanged_report_are_a_field_level_400():
    from inventory.services import ReportRejected

    agent = Agent("dgx-01")
    report = server_report("dgx-01")
    agent.send(report)
    bad = with_events(report, {**xid(13, BUS2, T0), "count": 0, "kind": "ecc"})
    with pytest.raises(ReportRejected) as rejected:
        agent.send(bad)
    assert rejected.value.status_code == 400
    assert set(rejected.value.errors) == {"events.0.count", "events.0.kind"}
    assert Report.objects.count() == 1


def test_an_agent_cannot_put_events_on_another_servers_gpu():
    Agent("dgx-victim").send(server_report("dgx-victim"))
    victim_gpu = Gpu.objects.get(uuid=gpu_uuid("dgx-victim", 0))
    Agent("dgx-liar").send(
        with_events(server_report("dgx-liar"), xid(79, "0000:f0:00.0", T0, uuid=victim_gpu.uuid))
    )
    health_sweep()
    event = HealthEvent.objects.get()
    assert event.server.hostname == "dgx-liar" and event.gpu_id is None
    assert not HealthEvent.objects.filter(gpu=victim_gpu).exists()


def test_a_sweep_that_finds_nothing_new_costs_three_small_queries():
    Agent("dgx-01").send(server_report("dgx-01"))
    health_sweep()
    with CaptureQueriesContext(connection) as queries:
        assert health_sweep() == 0
    sql = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    # the cursor made sure of, the cursor locked, the reports after it (savepoints are the
    # test's own transaction)
    assert len(sql) == 3, sql
