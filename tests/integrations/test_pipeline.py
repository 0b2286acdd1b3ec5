"""End to end with real processes: a finding in the database, beat's ticks, a real Celery
worker over Redis sending a signed webhook to a receiver and the alert to a real Alertmanager."""

from __future__ import annotations

import json

import pytest

from findings.models import Finding
from integrations.models import Delivery, Webhook
from integrations.signing import signature_valid
from tests.conftest import TEST_REDIS_URL, require
from tests.integration.services import redis_ping, start_beat, start_worker, wait_until
from tests.integrations.programs import Alertmanager, binary
from tests.integrations.receiver import Receiver

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

REDIS_URL = TEST_REDIS_URL
SECRET = "pipeline-secret-0123456789"


def test_a_finding_reaches_a_webhook_and_alertmanager_through_a_real_worker(tmp_path):
    import redis

    require(redis_ping(REDIS_URL), f"no Redis at {REDIS_URL} (apt-get install redis-server)")
    binary("prometheus-alertmanager", "prometheus-alertmanager")
    redis.Redis.from_url(REDIS_URL).flushdb()
    receiver = Receiver().start()
    manager = Alertmanager(tmp_path)
    webhook = Webhook.objects.create(url=receiver.url, secret=SECRET, events=["finding.raised"])
    extra = {
        "ATLAS_WEBHOOK_SCAN_INTERVAL_S": "1",
        "ATLAS_ALERT_INTERVAL_S": "1",
        "ATLAS_ALERTMANAGER_URL": manager.url,
        "ATLAS_PUBLIC_URL": "https://atlas.example.org",
        "ATLAS_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",  # the receiver is on loopback
    }
    worker = start_worker(REDIS_URL, tmp_path, **extra)
    beat = start_beat(REDIS_URL, tmp_path, **extra)
    try:
        finding = Finding.objects.create(
            type="node_without_server",
            severity="warning",
            subject="node:prod/gpu-x01",
            message="gpu-x01: a Kubernetes node no agent reports",
        )
        delivered = wait_until(lambda: len(receiver.received) >= 1, 60, 0.25)
        assert delivered, f"worker:\n{worker.output()[-3000:]}\nbeat:\n{beat.output()[-2000:]}"
        alerted = wait_until(lambda: len(manager.alerts()) == 1, 60, 0.25)
        assert alerted, f"worker:\n{worker.output()[-3000:]}"
    finally:
        beat.stop()
        worker.stop()
        manager.stop()
        receiver.stop()
    got = receiver.received[0]
    headers = {k.lower(): v for k, v in got.headers.items()}
    assert signature_valid(got.body, SECRET, headers["x-atlas-signature"])
    assert json.loads(got.body)["finding"]["id"] == finding.pk
    delivery = Delivery.objects.get(webhook=webhook)
    assert delivery.status == "delivered" and delivery.attempts == 1
    assert len(receiver.received) == 1  # beat's later ticks did not send it again
