"""The embedded default's beat: `manage.py runschedule`, which `make run` starts beside the
server, runs beat's schedule with no broker, so a finding reaches a webhook there too."""

from __future__ import annotations

import json
import os
import socket
import sys

import pytest
from rest_framework.test import APIClient

from clusters.models import Finding
from integrations.models import Delivery
from integrations.signing import signature_valid
from tests.integrations.receiver import Receiver
from tests.nodes import k8s_node, k8s_node_list

from .services import Process, free_port, wait_until
from .services import test_database_url as database_url  # not a test of this module

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SECRET = "embedded-secret-0123456789"


def embedded_env(var_dir, **extra: str) -> dict[str, str]:
    """This run's test database, no broker: the process runs as under `make run`."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL")}
    env.update(
        DATABASE_URL=database_url(),
        ATLAS_VAR_DIR=str(var_dir),
        PYTHONUNBUFFERED="1",
        DJANGO_SETTINGS_MODULE="config.settings",
        **extra,
    )
    return env


def test_a_finding_reaches_a_webhook_through_runschedule_which_stops_with_the_server(
    staff, tmp_path
):
    receiver = Receiver().start()
    server = socket.create_server(("127.0.0.1", free_port()))  # stands for runserver
    server_url = f"http://127.0.0.1:{server.getsockname()[1]}"
    api = APIClient()
    api.force_authenticate(staff)
    hook = {"url": receiver.url, "secret": SECRET, "events": ["finding.raised"]}
    assert api.post("/api/v1/webhooks/", hook, format="json").status_code == 201
    schedule = Process(
        [
            sys.executable,
            "manage.py",
            "runschedule",
            "--patience",
            "2",
            "--with-server",
            server_url,
        ],
        env=embedded_env(tmp_path, ATLAS_WEBHOOK_SCAN_INTERVAL_S="1"),
        log=tmp_path / "runschedule.log",
    )
    try:
        snapshot = k8s_node_list(k8s_node("ghost-01"))  # a node no agent reports
        posted = api.post(
            "/api/v1/clusters/trial/snapshots/", snapshot, content_type="application/json"
        )
        assert posted.status_code == 201, posted.content
        finding = Finding.objects.get(type="node_without_server", resolved_at=None)
        delivered = wait_until(lambda: len(receiver.received) >= 1, 60, 0.25)
        assert delivered, f"runschedule:\n{schedule.output()[-3000:]}"
        server.close()  # the server stops: so does the schedule, within its patience
        stopped = wait_until(lambda: not schedule.alive(), 30, 0.25)
        assert stopped, f"runschedule:\n{schedule.output()[-3000:]}"
    finally:
        schedule.stop()
        receiver.stop()
        server.close()
    got = receiver.received[0]
    headers = {k.lower(): v for k, v in got.headers.items()}
    assert signature_valid(got.body, SECRET, headers["x-atlas-signature"])
    assert json.loads(got.body)["finding"]["id"] == finding.pk
    delivery = Delivery.objects.get()
    assert delivery.status == "delivered" and delivery.attempts == 1
    assert len(receiver.received) == 1  # later ticks did not send it again
    output = schedule.output()
    assert "runschedule: the server stopped" in output
    assert "Traceback" not in output and "locked" not in output, output[-3000:]


def test_runschedule_refuses_to_run_beside_a_broker(tmp_path):
    schedule = Process(
        [sys.executable, "manage.py", "runschedule"],
        env=embedded_env(tmp_path, CELERY_BROKER_URL="redis://127.0.0.1:9/0"),
        log=tmp_path / "runschedule.log",
    )
    try:
        assert wait_until(lambda: not schedule.alive(), 60, 0.25)
    finally:
        schedule.stop()
    assert schedule.popen.returncode != 0
    assert "run `celery -A config beat`" in schedule.output()
