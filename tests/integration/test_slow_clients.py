"""Fifty slow clients in front of the production shape cost agents and people nothing
(issue 26 item 7): gunicorn with the README's flags behind nginx running the shipped
deploy/nginx/cluster-atlas-proxy.conf. Each slow connection sends its request head a byte a
second and never finishes it; while all fifty stay open, agents' digest heartbeats and a
dashboard page answer through nginx, and a body over an endpoint's limit is refused there
unread. Without the proxy the same connections hold every gunicorn thread: bench/slowloris.py
measures both.
"""

from __future__ import annotations

import http.client
import json
import os
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import settings
from django.test import Client

from agent.schema import DIGEST_HEADER, DIGEST_SCHEME, report_digest
from inventory.services import agent_token_create
from tests.conftest import require
from tests.reports import make_report

from . import services
from .proxy import Nginx, SlowClients, nginx_binary, start_gunicorn, wait_for_http
from .services import free_port, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SLOW_CLIENTS = 50
WORKERS, THREADS = 2, 4  # the README's production command: 8 threads in all


def request(port: int, method: str, path: str, headers: dict[str, str], body: bytes = b""):
    """One request on a fresh connection: (status, headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request(method, path, body=body or None, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


@pytest.fixture
def start_proxied(tmp_path):
    """Starts gunicorn (with `extra` settings) behind nginx: returns (nginx's port, gunicorn's
    port); both are stopped after the test."""
    binary = nginx_binary()
    require(binary is not None, "nginx not found (apt-get install nginx)")
    assert binary is not None
    started = []

    def start(**extra: str) -> tuple[int, int]:
        env = dict(os.environ)
        for name in ("CELERY_BROKER_URL", "REDIS_URL"):
            env.pop(name, None)  # tasks in process: nothing here needs a worker
        env.update(
            DATABASE_URL=services.test_database_url(),
            DJANGO_SETTINGS_MODULE="config.settings",
            DJANGO_DEBUG="0",
            DJANGO_SECRET_KEY=settings.SECRET_KEY,  # the test's sessions are the server's
            DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
            ATLAS_LOG_LEVEL="ERROR",
            **extra,
        )
        port = free_port()
        gunicorn = start_gunicorn(port, env, tmp_path / "gunicorn.log", WORKERS, THREADS)
        started.append(gunicorn)
        assert wait_for_http(port, 60), gunicorn.output()
        nginx = Nginx(binary, tmp_path / "nginx", port)
        started.append(nginx)
        return nginx.port, port

    yield start
    for process in reversed(started):
        process.stop()


@pytest.fixture
def proxied(start_proxied) -> int:
    """gunicorn behind nginx: nginx's port."""
    return start_proxied()[0]


def test_heartbeats_and_pages_answer_while_fifty_slow_clients_hold_connections(
    proxied, post_report, django_user_model
):
    port = proxied
    _token, key = agent_token_create(name="dgx-slow")
    report = make_report("dgx-slow")
    assert post_report(report, key).status_code == 202  # applied in process: a known digest
    heartbeat = {
        "Authorization": f"Token {key}",
        "Content-Type": "application/json",
        DIGEST_HEADER: f"{DIGEST_SCHEME}{report_digest(report)}",
    }
    person = Client()
    person.force_login(django_user_model.objects.create_user("slow-reader"))
    page = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={person.cookies['sessionid'].value}"}
    assert request(port, "POST", "/api/v1/reports/", heartbeat)[0] == 200

    slow = SlowClients(port, SLOW_CLIENTS, interval=1.0)
    try:
        assert wait_until(lambda: slow.sent >= 2, 10), "the slow clients did not start"
        assert slow.open_count() == SLOW_CLIENTS  # nginx holds all of them, waiting

        # At once, as a fleet's agents and a few people would: all within nginx's 10 s
        # client_header_timeout, which ends the slow connections after that.
        calls = [("POST", "/api/v1/reports/", heartbeat)] * 20 + [("GET", "/servers/", page)] * 3
        calls.append(("POST", "/api/v1/reports/", {**heartbeat, "Content-Length": str(3 << 20)}))
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda call: request(port, *call), calls))
        answers, pages, too_large = results[:20], results[20:23], results[23]

        assert slow.open_count() == SLOW_CLIENTS  # still held while all of that answered
    finally:
        slow.close()

    assert [status for status, _, _ in answers] == [200] * 20
    assert all(json.loads(body)["status"] == "unchanged" for _, _, body in answers)
    assert [status for status, _, _ in pages] == [200] * 3
    assert all(b"dgx-slow" in body for _, _, body in pages)
    # Over ATLAS_REPORT_MAX_BYTES: refused by nginx on its Content-Length, the body unsent.
    assert too_large[0] == 413 and too_large[1].get("Connection") == "close"
    assert json.loads(too_large[2])["detail"] == "body too large"


def test_a_clients_own_scheme_header_is_replaced_by_the_proxy(start_proxied):
    """Django trusts X-Forwarded-Proto (DJANGO_SECURE_PROXY_SSL_HEADER) only because the
    proxy always sets it: a client's "https" over plain HTTP is still redirected through
    nginx, where straight to gunicorn it would have been believed."""
    nginx_port, gunicorn_port = start_proxied(
        DJANGO_SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO", DJANGO_SECURE_SSL_REDIRECT="1"
    )
    claims = {"X-Forwarded-Proto": "https"}
    status, headers, _ = request(nginx_port, "GET", "/login/", claims)
    assert status == 301 and headers["Location"].startswith("https://127.0.0.1")
    assert request(gunicorn_port, "GET", "/login/", claims)[0] == 200
