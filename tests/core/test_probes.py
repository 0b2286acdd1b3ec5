"""/healthz and /readyz (core/probes.py): what a probe sees, and what it never sees."""

from __future__ import annotations

import json

import pytest
from django.db import connections
from django.test import Client, override_settings

from core import probes

SECRET = "s3cret-pa55word"


@pytest.fixture(autouse=True)
def _fresh_migration_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probes.migrations, "applied", False)


def test_healthz_answers_without_the_database(client: Client, monkeypatch) -> None:
    """No django_db mark: any query would raise; the checks are not even called."""
    monkeypatch.setattr(probes, "check_database", lambda: pytest.fail("healthz asked the DB"))
    answer = client.get("/healthz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok"}
    assert answer["Cache-Control"] == "no-store"


@pytest.mark.django_db
@override_settings(
    ALLOWED_HOSTS=["atlas.example.org"], SECURE_SSL_REDIRECT=True, CELERY_TASK_ALWAYS_EAGER=True
)
def test_probes_answer_a_pod_address_over_plain_http(client: Client) -> None:
    """The kubelet probes http://<pod IP>:8000: neither ALLOWED_HOSTS (400) nor the HTTPS
    redirect (301) may stand in the way; other paths keep both."""
    for path in ("/healthz", "/readyz"):
        assert client.get(path, HTTP_HOST="10.1.2.3:8000").status_code == 200, path
    assert client.get("/login/", HTTP_HOST="10.1.2.3:8000").status_code == 400


@pytest.mark.django_db
@override_settings(CELERY_TASK_ALWAYS_EAGER=True)
def test_readyz_database_and_migrations_ok_without_a_broker(client: Client) -> None:
    answer = client.get("/readyz")
    assert answer.status_code == 200
    assert answer.json() == {
        "status": "ready",
        "checks": {"database": "ok", "migrations": "ok", "broker": "none"},
    }
    assert probes.migrations.applied


@pytest.mark.django_db
@override_settings(CELERY_TASK_ALWAYS_EAGER=False)
def test_readyz_broker_down_is_503_and_names_no_secret(client: Client) -> None:
    from config.celery import app

    url = f"redis://:{SECRET}@127.0.0.1:1/0"  # port 1: nothing listens
    previous = app.conf.broker_url
    app.conf.broker_url = url
    try:
        answer = client.get("/readyz")
    finally:
        app.conf.broker_url = previous
    assert answer.status_code == 503
    body = answer.json()
    assert body["status"] == "not ready"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["broker"].startswith("unreachable (")
    text = answer.content.decode()
    assert SECRET not in text and "redis://" not in text and "127.0.0.1" not in text


@pytest.mark.django_db
def test_readyz_pending_migrations_are_503(client: Client, monkeypatch) -> None:
    class Executor:
        def __init__(self, connection: object) -> None:
            self.loader = type("L", (), {"graph": type("G", (), {"leaf_nodes": lambda s: []})()})()

        def migration_plan(self, targets: object) -> list[tuple[object, bool]]:
            return [(object(), False), (object(), False)]

    monkeypatch.setattr(probes, "MigrationExecutor", Executor)
    with override_settings(CELERY_TASK_ALWAYS_EAGER=True):
        answer = client.get("/readyz")
    assert answer.status_code == 503
    assert answer.json()["checks"]["migrations"] == "2 pending"
    assert not probes.migrations.applied  # asked again next time


@pytest.mark.django_db
def test_readyz_database_down_is_503_and_names_no_secret(client: Client, monkeypatch) -> None:
    class Broken:
        def cursor(self) -> None:
            raise RuntimeError(f"could not connect to postgres://atlas:{SECRET}@db/atlas")

    monkeypatch.setattr(probes, "connections", {"default": Broken()})
    with override_settings(CELERY_TASK_ALWAYS_EAGER=True):
        answer = client.get("/readyz")
    assert answer.status_code == 503
    assert answer.json()["checks"] == {
        "database": "unreachable (RuntimeError)",
        "migrations": "unknown",
        "broker": "none",
    }
    assert SECRET not in answer.content.decode()
    assert connections["default"].vendor  # the real connections were never touched


def test_probes_refuse_other_methods(client: Client) -> None:
    answer = client.post("/healthz")
    assert answer.status_code == 405
    assert answer["Allow"] == "GET, HEAD"
    assert json.loads(answer.content)["status"] == "method not allowed"
