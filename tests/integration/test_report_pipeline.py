"""Agent report -> API -> Redis -> a real Celery worker -> the inventory, end to end."""

from __future__ import annotations

import json
import time

import pytest

from inventory.models import Gpu, MigDevice, Report, Server
from tests.reports import make_report

from .services import RedisServer, black_hole, start_beat, start_worker, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def post(client, report, key):
    return client.post(
        "/api/v1/reports/",
        data=json.dumps(report),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {key}",
    )


def report_status(report_id: int) -> str:
    return Report.objects.filter(pk=report_id).values_list("status", flat=True).first()


def test_a_real_worker_applies_a_posted_report(
    client, agent_token, redis_url, use_broker, tmp_path
):
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    worker = start_worker(redis_url, tmp_path)
    try:
        use_broker(redis_url)
        response = post(client, make_report("dgx-int", mig_gpus={0: ["1g.10gb"] * 7}), agent_token)
        assert response.status_code == 202
        report_id = response.json()["id"]
        assert wait_until(lambda: report_status(report_id) == "applied", 30), worker.output()
    finally:
        worker.stop()
    server = Server.objects.get(hostname="dgx-int")
    assert Gpu.objects.filter(server=server).count() == 8
    assert MigDevice.objects.filter(gpu__server=server).count() == 7
    assert "apply_report[" in worker.output()


def test_report_is_kept_while_the_broker_is_away_and_applied_by_the_sweep(
    client, agent_token, redis_binary, use_broker, tmp_path
):
    broker = RedisServer(tmp_path)
    broker.start()
    extra = {"ATLAS_SWEEP_INTERVAL_S": "1", "ATLAS_PENDING_REPORT_GRACE_S": "0"}
    worker = start_worker(broker.url, tmp_path, **extra)
    beat = None
    try:
        use_broker(broker.url)
        broker.stop()
        response = post(client, make_report("dgx-away"), agent_token)
        assert response.status_code == 202
        report_id = response.json()["id"]
        assert report_status(report_id) == "pending"
        assert not Server.objects.filter(hostname="dgx-away").exists()

        broker.start()  # same port: the worker reconnects; beat's sweep finds the report
        beat = start_beat(broker.url, tmp_path, **extra)
        applied = wait_until(lambda: report_status(report_id) == "applied", 60, 0.25)
        assert applied, f"worker:\n{worker.output()[-3000:]}\nbeat:\n{beat.output()[-2000:]}"
    finally:
        if beat:
            beat.stop()
        worker.stop()
        broker.stop()
    assert Gpu.objects.filter(server__hostname="dgx-away").count() == 8
    assert "sweep_pending_reports" in worker.output()


def timed_posts(client, key, count: int) -> list[float]:
    times = []
    for n in range(count):
        report = make_report("dgx-outage", driver=f"550.{n}")  # each one changed
        start = time.perf_counter()
        response = post(client, report, key)
        times.append(time.perf_counter() - start)
        assert response.status_code == 202, response.content
    return times


def test_the_202_path_stays_fast_while_the_broker_is_a_black_hole(client, agent_token, use_broker):
    """A broker host that is down costs connect timeouts (seconds): one report pays them,
    the next ones skip the broker and stay pending for the sweep."""
    with black_hole() as url:
        use_broker(url)
        first, *rest = timed_posts(client, agent_token, 5)
    assert first > 1.0  # the failed hand-off: this is what every report paid before
    assert max(rest) < 0.5, rest
    assert set(Report.objects.values_list("status", flat=True)) == {"pending"}


def test_the_broker_is_tried_again_off_the_request_path_once_it_is_back(
    client, agent_token, redis_binary, use_broker, tmp_path, settings
):
    import redis

    from inventory.tasks import broker as breaker

    server = RedisServer(tmp_path)
    server.start()
    try:
        use_broker(server.url)
        breaker.retry_after_s = 0.2
        server.stop()
        timed_posts(client, agent_token, 1)  # fails: the breaker opens
        assert breaker.is_open
        server.start()  # the same port
        time.sleep(0.3)
        timed_posts(client, agent_token, 1)  # the window is over: a trial, in the background
        assert wait_until(lambda: not breaker.is_open, 10)
        timed_posts(client, agent_token, 1)  # published inline again
        queued = redis.Redis.from_url(server.url).llen("celery")
    finally:
        breaker.retry_after_s = settings.ATLAS_BROKER_RETRY_AFTER_S
        server.stop()
    assert queued == 2  # the trial's report and the next; the first waits for the sweep


def test_a_real_worker_runs_the_follow_ups_of_an_applied_report(
    client, agent_token, redis_url, use_broker, tmp_path
):
    """The same follow-ups as in-process (config/celery.py), with no beat: the server's
    findings, the full reconcile, the health record (tests/clusters/test_reconcile_after_report
    proves what they write)."""
    import redis

    from clusters.models import ReconcileState
    from health.models import HealthCursor

    redis.Redis.from_url(redis_url).flushdb()
    worker = start_worker(redis_url, tmp_path)
    try:
        use_broker(redis_url)
        response = post(client, make_report("dgx-follow"), agent_token)
        assert response.status_code == 202
        done = ("reconciled ReconcileResult(", "health.tasks.record_health[")
        assert wait_until(lambda: all(d in worker.output() for d in done), 30), worker.output()
    finally:
        worker.stop()
    output = worker.output()
    assert "reconcile_server[" in output and "clusters.tasks.reconcile[" in output
    assert HealthCursor.objects.exists()
    assert ReconcileState.objects.get().requested_at is None
