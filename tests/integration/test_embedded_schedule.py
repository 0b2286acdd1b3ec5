"""The embedded default's beat: `manage.py runschedule`, which `make run` starts beside the
server, runs beat's schedule with no broker, so a finding reaches a webhook there too."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from rest_framework.test import APIClient

from findings.models import Finding
from integrations.models import Delivery
from integrations.signing import signature_valid
from tests.conftest import require
from tests.integrations.programs import Alertmanager
from tests.integrations.receiver import Receiver
from tests.nodes import k8s_node, k8s_node_list

from .services import REPO, Process, free_port, wait_until
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
        ATLAS_WEBHOOK_ALLOWED_NETWORKS="127.0.0.0/8",  # the test's receiver is on loopback
        **extra,
    )
    return env


def test_a_finding_reaches_a_webhook_through_runschedule_which_stops_with_the_server(
    staff, tmp_path, settings
):
    settings.ATLAS_WEBHOOK_ALLOWED_NETWORKS = "127.0.0.0/8"  # the receiver is on loopback
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


def test_runschedule_tells_alertmanager_of_an_open_finding(tmp_path):
    manager = Alertmanager(tmp_path)  # skipped (failed in CI) without prometheus-alertmanager
    finding = Finding.objects.create(
        type="node_without_server",
        severity="warning",
        subject="node:trial/ghost-01",
        message="ghost-01: a Kubernetes node no agent reports",
    )
    schedule = Process(
        [sys.executable, "manage.py", "runschedule"],
        env=embedded_env(tmp_path, ATLAS_ALERT_INTERVAL_S="1", ATLAS_ALERTMANAGER_URL=manager.url),
        log=tmp_path / "runschedule.log",
    )
    try:
        alerted = wait_until(lambda: len(manager.alerts()) == 1, 60, 0.25)
        assert alerted, f"runschedule:\n{schedule.output()[-3000:]}"
        (alert,) = manager.alerts()
    finally:
        schedule.stop()
        manager.stop()
    assert alert["labels"]["alertname"] == finding.type
    assert alert["labels"]["severity"] == finding.severity
    assert "Traceback" not in schedule.output()


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


def _post(url: str, token: str, body: bytes, content_type: str = "application/json") -> dict:
    request = urllib.request.Request(  # the test's own server, on loopback
        url, data=body, headers={"Authorization": f"Token {token}", "Content-Type": content_type}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=5).close()
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group is left (make itself once reaped: a zombie counts)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_make_run_delivers_a_webhook_for_a_finding_and_ctrl_c_stops_it_all(tmp_path):
    """As a person would: `make run`, register a webhook, cause a finding, see the delivery,
    press Ctrl-C (SIGINT to the foreground process group)."""
    require(shutil.which("make") is not None, "make not found (apt-get install make)")
    receiver = Receiver().start()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = embedded_env(tmp_path, ATLAS_WEBHOOK_SCAN_INTERVAL_S="1")
    del env["DATABASE_URL"]  # the embedded default: the SQLite file in ATLAS_VAR_DIR
    log = (tmp_path / "make-run.log").open("wb")
    make = subprocess.Popen(  # the venv is this one: make is not to install into it
        ["make", "-o", ".venv/.installed", "run", f"PORT={port}", f"PY={sys.executable}"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )

    def output() -> str:
        return (tmp_path / "make-run.log").read_text(errors="replace")[-4000:]

    try:
        assert wait_until(lambda: _answers(f"{url}/login/"), 240, 0.5), output()
        token = subprocess.run(
            [sys.executable, "manage.py", "createapitoken", "admin", "--name", "test"],
            cwd=REPO, env=env, capture_output=True, text=True, check=True, timeout=120,
        ).stdout.split()[-1]  # fmt: skip
        hook = {"url": receiver.url, "secret": SECRET, "events": ["finding.raised"]}
        _post(f"{url}/api/v1/webhooks/", token, json.dumps(hook).encode())
        snapshot = k8s_node_list(k8s_node("ghost-01")).encode()
        assert _post(f"{url}/api/v1/clusters/trial/snapshots/", token, snapshot)["nodes"] == 1
        assert wait_until(lambda: len(receiver.received) >= 1, 90, 0.25), output()
        os.killpg(make.pid, signal.SIGINT)  # Ctrl-C
        stopped = lambda: make.poll() is not None and not _group_alive(make.pid)  # noqa: E731
        assert wait_until(stopped, 60, 0.25), output()
    finally:
        if _group_alive(make.pid):
            os.killpg(make.pid, signal.SIGKILL)
        make.wait(10)
        log.close()
        receiver.stop()
    got = receiver.received[0]
    headers = {k.lower(): v for k, v in got.headers.items()}
    assert signature_valid(got.body, SECRET, headers["x-atlas-signature"])
    body = json.loads(got.body)
    assert body["event"] == "finding.raised" and "ghost-01" in body["finding"]["message"]
    text = output()
    assert "runschedule: stopped" in text and "keep-alive: stopped" in text, text
    assert "Traceback" not in text and "locked" not in text, text
