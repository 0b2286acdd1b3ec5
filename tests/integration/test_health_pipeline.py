"""Kernel-log events end to end: agent report -> API -> Redis -> a real worker applies it ->
beat's `record-health` tick -> the worker records the events and counters."""

from __future__ import annotations

import json

import pytest

from health.models import GpuCounterSample, HealthEvent
from tests.health.fleet import server_report, with_events, xid
from tests.reports import gpu_uuid

from .services import start_beat, start_worker, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_events_of_a_posted_report_are_recorded_by_a_real_worker_on_beats_tick(
    client, agent_token, redis_url, use_broker, tmp_path
):
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    extra = {"ATLAS_HEALTH_INTERVAL_S": "1"}
    worker = start_worker(redis_url, tmp_path, **extra)
    beat = start_beat(redis_url, tmp_path, **extra)
    report = with_events(
        server_report("dgx-health"),
        xid(79, "0000:38:00.0", "2026-11-30T08:00:00Z", uuid=gpu_uuid("dgx-health", 2)),
        xid(13, "0000:38:00.0", "2026-11-30T08:00:00Z", count=100_000, key="kmsg:b:1-100000"),
    )
    try:
        use_broker(redis_url)
        response = client.post(
            "/api/v1/reports/",
            data=json.dumps(report),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Token {agent_token}",
        )
        assert response.status_code == 202
        recorded = wait_until(lambda: HealthEvent.objects.count() == 2, 60, 0.25)
        assert recorded, f"worker:\n{worker.output()[-3000:]}\nbeat:\n{beat.output()[-2000:]}"
    finally:
        beat.stop()
        worker.stop()
    storm = HealthEvent.objects.get(code=13)
    assert storm.count == 100_000 and storm.gpu.uuid == gpu_uuid("dgx-health", 2)
    assert GpuCounterSample.objects.filter(current=True).count() == 8
    assert "record_health" in worker.output()
