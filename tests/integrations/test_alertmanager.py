"""Findings as Alertmanager v2 alerts: the alert's shape, re-sending while open, ending on
resolution; then a real Alertmanager showing the alert active, then resolved."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
import requests
from django.utils import timezone

from clusters.models import Cluster, Node
from findings.models import Finding
from integrations.alerts import finding_alert
from integrations.services.alertmanager import alertmanager_push
from integrations.tasks import push_alerts
from inventory.models import Server
from tests.integration.services import wait_until
from tests.integrations.programs import Alertmanager, binary
from tests.integrations.receiver import Receiver


def a_finding(**extra) -> Finding:
    server = Server.objects.create(identity="hostname:dgx-07", hostname="dgx-07")
    cluster = Cluster.objects.create(name="prod", kind="kubernetes")
    node = Node.objects.create(cluster=cluster, name="dgx-07", kind="kubernetes", server=server)
    fields = {
        "type": "gpu_count_mismatch",
        "severity": "critical",
        "subject": "node:prod/dgx-07",
        "message": "dgx-07: Kubernetes advertises 4 GPUs, the server has 8 <script>",
        "server": server,
        "node": node,
    }
    return Finding.objects.create(**(fields | extra))


def test_an_alert_names_the_finding_and_links_to_it():
    now = datetime(2026, 11, 30, 8, 0, tzinfo=timezone.get_fixed_timezone(0))
    row = {
        "id": 5,
        "type": "unhealthy_gpu",
        "severity": "critical",
        "subject": "server:dgx-07",
        "message": "GPU 3 fell off the bus",
        "first_seen": now - timedelta(hours=1),
        "resolved_at": None,
        "server_id": 7,
        "server__hostname": "dgx-07",
        "node_id": None,
        "node__name": None,
        "cluster__name": None,
        "node__cluster__name": None,
    }
    alert = finding_alert(
        row, now=now, ends_at=now + timedelta(minutes=3), public_url="https://atlas.example.org"
    )
    assert alert["labels"] == {
        "alertname": "unhealthy_gpu",
        "severity": "critical",
        "subject": "server:dgx-07",
        "server": "dgx-07",
        "source": "cluster-atlas",
    }
    assert alert["annotations"]["summary"] == "GPU 3 fell off the bus"
    assert alert["startsAt"] == "2026-11-30T07:00:00Z"
    assert alert["endsAt"] == "2026-11-30T08:03:00Z"
    assert alert["generatorURL"] == "https://atlas.example.org/findings/5/"
    resolved = finding_alert(
        row | {"resolved_at": now - timedelta(minutes=5)},
        now=now,
        ends_at=now + timedelta(minutes=3),
        public_url="https://atlas.example.org",
    )
    assert resolved["endsAt"] == "2026-11-30T07:55:00Z"


@pytest.mark.django_db
def test_nothing_is_sent_without_a_url(settings):
    settings.ATLAS_ALERTMANAGER_URL = ""
    a_finding()
    assert push_alerts.delay().get() == 0


@pytest.mark.django_db
def test_open_findings_are_resent_and_resolved_ones_end(settings):
    settings.ATLAS_PUBLIC_URL = "https://atlas.example.org"
    receiver = Receiver(status=200).start()
    url = f"http://127.0.0.1:{receiver.port}"
    try:
        finding = a_finding()
        long_resolved = Finding.objects.create(
            type="stale_agent",
            severity="warning",
            subject="server:old",
            message="old news",
            resolved_at=timezone.now() - timedelta(days=2),
        )
        assert alertmanager_push(url=url) == 1
        assert alertmanager_push(url=url) == 1  # re-sent while open
        first = json.loads(receiver.received[0].body)
        assert receiver.received[0].path == "/api/v2/alerts"
        assert [a["labels"]["alertname"] for a in first] == ["gpu_count_mismatch"]
        assert first[0]["labels"]["node"] == "dgx-07"
        assert first[0]["labels"]["cluster"] == "prod"
        ends_at = datetime.fromisoformat(first[0]["endsAt"].replace("Z", "+00:00"))
        assert ends_at > timezone.now() + timedelta(minutes=2)

        resolved_at = timezone.now()
        Finding.objects.filter(pk=finding.pk).update(resolved_at=resolved_at)
        assert alertmanager_push(url=url) == 1
        last = json.loads(receiver.received[-1].body)
        assert last[0]["endsAt"] == resolved_at.isoformat().replace("+00:00", "Z")
        assert "old" not in {a["labels"].get("server") for a in last}
        assert [a["labels"]["subject"] for a in last] == ["node:prod/dgx-07"]
        assert long_resolved.resolved_at is not None
    finally:
        receiver.stop()


@pytest.mark.django_db
def test_alertmanager_away_keeps_the_watermark(settings):
    from integrations.models import Watermark

    receiver = Receiver(status=503).start()
    try:
        a_finding()
        with pytest.raises(requests.HTTPError):
            alertmanager_push(url=f"http://127.0.0.1:{receiver.port}")
        assert not Watermark.objects.filter(name="alertmanager").exists()
    finally:
        receiver.stop()


@pytest.mark.django_db
def test_real_alertmanager_shows_the_alert_active_then_resolved(tmp_path, settings):
    binary("prometheus-alertmanager", "prometheus-alertmanager")
    settings.ATLAS_PUBLIC_URL = "https://atlas.example.org"
    manager = Alertmanager(tmp_path)
    try:
        finding = a_finding()
        assert alertmanager_push(url=manager.url) == 1
        alerts = manager.alerts()
        assert len(alerts) == 1
        alert = alerts[0]
        assert alert["status"]["state"] == "active"
        assert alert["labels"]["alertname"] == "gpu_count_mismatch"
        assert alert["labels"]["severity"] == "critical"
        assert alert["labels"]["server"] == "dgx-07"
        assert alert["annotations"]["summary"].startswith("dgx-07: Kubernetes advertises")
        assert alert["generatorURL"] == f"https://atlas.example.org/findings/{finding.pk}/"

        Finding.objects.filter(pk=finding.pk).update(resolved_at=timezone.now())
        assert alertmanager_push(url=manager.url) == 1
        # Alertmanager lists only alerts that have not ended: the resolved one leaves the list.
        assert wait_until(lambda: manager.alerts() == [], timeout=10, interval=0.2), (
            manager.alerts()
        )
    finally:
        manager.stop()
