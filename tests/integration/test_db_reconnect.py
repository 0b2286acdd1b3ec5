"""A kept database connection that PostgreSQL dropped costs no request a 500.

gunicorn serves the app with persistent connections (DATABASE_CONN_MAX_AGE); the test kills
its connection with pg_terminate_backend (a restart, a failover, an idle-session kill) and
posts again. With health checks off, the control shows what they prevent: the request that
meets the dropped connection, which now answers 503 with Retry-After (core/db/bounds.py), not
a 500, under the production settings (DJANGO_DEBUG=0: Django's debug page answers 500).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request

import pytest
from django.db import connection

from inventory.services import agent_token_create
from tests.conftest import require
from tests.reports import make_report

from . import services
from .services import Process, free_port, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _postgres_only():
    require(
        connection.vendor == "postgresql",
        "needs DATABASE_URL=postgres://... (pg_terminate_backend)",
    )


def post(url: str, key: str, body: bytes) -> int:
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Token {key}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0  # not listening yet


def kill_other_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


@pytest.mark.parametrize(("health_checks", "expected"), [("1", 202), ("0", 503)])
def test_a_dropped_database_connection_is_replaced_not_a_500(health_checks, expected, tmp_path):
    _, key = agent_token_create(name="reconnect")
    port = free_port()
    env = dict(os.environ)
    for name in ("CELERY_BROKER_URL", "REDIS_URL"):
        env.pop(name, None)  # tasks in process: the request does all its database work
    env.update(
        DATABASE_URL=services.test_database_url(),
        DATABASE_CONN_MAX_AGE="600",
        DATABASE_CONN_HEALTH_CHECKS=health_checks,
        DJANGO_SETTINGS_MODULE="config.settings",
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY="reconnect-test-key",
        ATLAS_LOG_LEVEL="ERROR",
        # every heartbeat a statement: one answered from memory would not meet the connection
        ATLAS_HEARTBEAT_CACHE_S="0",
    )
    server = Process(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--threads",
            "1",
        ],
        env=env,
        log=tmp_path / "gunicorn.log",
    )
    url = f"http://127.0.0.1:{port}/api/v1/reports/"
    body = json.dumps(make_report("dgx-reconnect")).encode()
    try:
        assert wait_until(lambda: post(url, key, body) == 202, 60, 0.2), server.output()
        assert post(url, key, body) == 202  # a heartbeat on the kept connection
        assert kill_other_connections() >= 1
        statuses = [post(url, key, body) for _ in range(3)]
    finally:
        server.stop()
    assert statuses[0] == expected, server.output()[-3000:]
    assert statuses[1:] == [202, 202]  # either way the connection after is a new one
