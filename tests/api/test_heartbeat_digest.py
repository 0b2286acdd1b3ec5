"""The heartbeat below the floor: an agent names its facts' digest (`X-Atlas-Report-Digest`)
with an empty body, and the backend answers "unchanged" without reading a report, or 409 for
the report in full. And the heartbeat at the floor: a whole unchanged report answered before
any validation, exactly as the strict path would answer it."""

from __future__ import annotations

import codecs
import json

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from agent.schema import report_digest
from inventory.models import Report, Server
from inventory.services import agent_token_state, heartbeat_receive
from tests.health.fleet import xid
from tests.heartbeats import UNKNOWN
from tests.reports import make_report

pytestmark = pytest.mark.django_db


@pytest.fixture
def post_digest(post_heartbeat):
    """A heartbeat with this X-Atlas-Report-Digest header, sent as it is."""

    def post(header: str, key: str, body: bytes = b""):
        return post_heartbeat(key, header=header, body=body)

    return post


@pytest.fixture
def applied(post_report, agent_token):
    """A report applied for the agent token's server; returns it."""
    report = make_report("dgx-07")
    assert post_report(report, agent_token).json()["status"] == "pending"
    assert Server.objects.get().last_report_hash
    return report


def test_the_agents_digest_is_the_one_the_backend_stores(applied):
    assert Report.objects.get().content_hash == report_digest(applied)
    assert Server.objects.get().last_report_hash == report_digest(applied)


def test_an_unchanged_digest_is_200_in_one_statement(applied, agent_token, post_digest):
    server = Server.objects.get()
    Server.objects.filter(pk=server.pk).update(last_seen=None)
    with CaptureQueriesContext(connection) as ctx:
        response = post_digest(f"sha256:{report_digest(applied)}", agent_token)
    assert response.status_code == 200, response.content
    assert response.json() == {
        "id": server.last_report_id,
        "status": "unchanged",
        "server": server.pk,
    }
    # sized, as the view's answers are (CommonMiddleware): gunicorn would send it chunked
    assert response["Content-Length"] == str(len(response.content))
    sql = [q["sql"] for q in ctx.captured_queries]
    assert len(sql) == 1 and sql[0].startswith("UPDATE") and "RETURNING" in sql[0], sql
    assert Server.objects.get().last_seen is not None
    assert Report.objects.count() == 1


def test_the_header_is_case_insensitive_in_its_scheme_and_hex(applied, agent_token, post_digest):
    response = post_digest(f"SHA256:{report_digest(applied).upper()}", agent_token)
    assert response.status_code == 200 and response.json()["status"] == "unchanged"


def test_a_changed_digest_asks_for_the_report_and_stores_nothing(applied, agent_token, post_digest):
    changed = make_report("dgx-07", gpus=4)
    response = post_digest(f"sha256:{report_digest(changed)}", agent_token)
    assert response.status_code == 409
    assert response.json()["status"] == "send-report"
    assert Report.objects.count() == 1


def test_a_token_not_bound_yet_is_asked_for_the_report(agent_token, post_digest):
    response = post_digest(f"sha256:{report_digest(make_report())}", agent_token)
    assert response.status_code == 409 and response.json()["status"] == "send-report"
    assert not Server.objects.exists()


def test_facts_changed_by_another_report_ask_for_the_report(applied, agent_token, post_digest):
    Server.objects.update(last_report_hash="")  # e.g. a GPU moved to another server
    response = post_digest(f"sha256:{report_digest(applied)}", agent_token)
    assert response.status_code == 409


@pytest.mark.parametrize("header", ["", "sha256:", "md5:" + "0" * 64, "sha256:" + "g" * 64])
def test_a_malformed_digest_is_400_naming_the_header(applied, agent_token, post_digest, header):
    response = post_digest(header, agent_token)
    assert response.status_code == 400
    assert "sha256:<64 hex digits>" in response.json()["errors"]["X-Atlas-Report-Digest"][0]


def test_a_digest_with_an_unknown_token_is_401(applied, post_digest):
    response = post_digest(f"sha256:{report_digest(applied)}", "caa_not-a-token")
    assert response.status_code == 401


@pytest.mark.parametrize("digest", [True, False])
def test_an_unknown_key_is_refused_as_drf_would_after_the_heartbeat_and_one_lookup(
    applied, post_heartbeat, django_assert_num_queries, digest
):
    named = report_digest(applied) if digest else None
    with django_assert_num_queries(2):  # the heartbeat's statement missed; the token's state
        response = post_heartbeat("caa_not-a-token", digest=named, body=json.dumps(applied))
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"
    assert response.json() == UNKNOWN
    assert response["Content-Length"] == str(len(response.content))


def test_a_digest_with_a_changed_report_in_the_body_receives_the_report(
    applied, agent_token, post_digest
):
    changed = make_report("dgx-07", gpus=4)
    body = json.dumps(changed).encode()
    response = post_digest(f"sha256:{report_digest(changed)}", agent_token, body)
    assert response.status_code == 202 and response.json()["status"] == "pending"
    assert Report.objects.count() == 2


def test_an_unchanged_report_is_answered_before_validation(
    applied, post_report, agent_token, monkeypatch
):
    from inventory.services import ingest

    def must_not_run(*args, **kwargs):
        raise AssertionError("a heartbeat went through the strict path")

    monkeypatch.setattr(ingest, "report_errors", must_not_run)
    monkeypatch.setattr(ingest, "json_loads", must_not_run)
    again = {**applied, "collected_at": "2030-01-01T00:00:00Z"}
    response = post_report(again, agent_token)
    assert response.status_code == 202 and response.json()["status"] == "unchanged"


@pytest.mark.parametrize(
    ("collected_at", "field"),
    [
        ("NaN", "body"),  # the strict decoder refuses NaN
        ("1e999", "body"),  # ... and a number beyond a double
        ('"2030\\u0000"', "collected_at"),  # ... and NUL in any string
        ('"\\ud800"', "collected_at"),  # ... and a lone surrogate
    ],
)
def test_an_unchanged_report_the_strict_decoder_refuses_is_still_400(
    applied, post_report, agent_token, collected_at, field
):
    body = json.dumps({**applied, "collected_at": "@"}).replace('"@"', collected_at)
    response = post_report(body, agent_token)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]


def test_an_unchanged_report_with_a_bom_is_still_a_heartbeat(applied, post_report, agent_token):
    body = codecs.BOM_UTF8 + json.dumps(applied).encode()
    response = post_report(body, agent_token)
    assert response.status_code == 202 and response.json()["status"] == "unchanged"


def test_an_unchanged_report_in_utf16_is_400_as_before(applied, post_report, agent_token):
    response = post_report(json.dumps(applied).encode("utf-16"), agent_token)
    assert response.status_code == 400


def test_an_unchanged_report_with_events_is_stored_with_them(applied, post_report, agent_token):
    event = xid(79, applied["gpus"][0]["pci_bus_id"], "2026-11-30T10:00:00Z")
    response = post_report({**applied, "events": [event]}, agent_token)
    assert response.status_code == 202 and response.json()["status"] == "applied"
    assert Report.objects.count() == 2


def test_heartbeat_receive_leaves_what_it_is_not_sure_of_to_the_strict_path(applied, agent_token):
    state = agent_token_state(agent_token)
    body = json.dumps(applied).encode()
    assert heartbeat_receive(state=state, body=body).status == "unchanged"
    for unsure in (
        body.replace(b'"schema"', b'"schema2"'),  # other facts
        b"\xef\xbb\xbf" + body,  # a BOM: the strict decoder takes it, this one does not
        json.dumps({**applied, "collected_at": ["2030"]}).encode(),  # not a plain value
        b"[" * 5000,  # deeper than the decoder recurses
        b"[]",
    ):
        assert heartbeat_receive(state=state, body=unsure) is None


def test_heartbeats_skip_the_middleware_people_need_but_not_https(
    applied, agent_token, post_digest, settings
):
    digest = f"sha256:{report_digest(applied)}"
    answer = post_digest(digest, agent_token)
    assert answer.status_code == 200 and "Content-Security-Policy" not in answer
    assert "Content-Security-Policy" in Client().get("/api/v1/servers/")  # DRF's 401
    settings.SECURE_SSL_REDIRECT = True  # SecurityMiddleware still comes first
    headers = {"HTTP_AUTHORIZATION": f"Token {agent_token}", "HTTP_X_ATLAS_REPORT_DIGEST": digest}
    answer = Client().post("/api/v1/reports/", b"", "application/json", **headers)
    assert answer.status_code == 301 and answer["Location"].startswith("https://")


def test_without_the_middleware_the_view_answers_heartbeats_alike(
    applied, agent_token, post_digest, post_report, settings
):
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if "AgentHeartbeat" not in m]
    answer = post_digest(f"sha256:{report_digest(applied)}", agent_token)
    assert answer.status_code == 200 and answer.json()["status"] == "unchanged"
    assert post_digest("sha256:" + "0" * 64, agent_token).status_code == 409
    answer = post_report(applied, agent_token)
    assert answer.status_code == 202 and answer.json()["status"] == "unchanged"
    assert Report.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_dropped_database_connection_costs_a_heartbeat_no_500(settings):
    """Heartbeats skip the per-request health check; a dropped connection is replaced, on
    PostgreSQL and on the embedded SQLite alike (core/db/sqlite3/base.py)."""
    from django.db import connection

    from inventory.services import agent_token_create

    _, key = agent_token_create(name="dropped")
    report = make_report("dgx-drop")
    client = Client()
    headers = {"HTTP_AUTHORIZATION": f"Token {key}"}
    assert client.post("/api/v1/reports/", report, "application/json", **headers).status_code
    digest = {**headers, "HTTP_X_ATLAS_REPORT_DIGEST": f"sha256:{report_digest(report)}"}
    connection.ensure_connection()
    dropped = connection.connection
    try:
        dropped.close()  # the server dropped it (restart, failover, idle kill)
        answer = client.post("/api/v1/reports/", b"", "application/json", **digest)
        assert answer.status_code == 200, answer.content
        assert connection.connection is not dropped
        assert Server.objects.get(hostname="dgx-drop").last_seen is not None
    finally:  # whatever happened, the tests after this one on this worker get a connection
        if connection.connection is dropped:
            connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_closed_connection_is_unusable_so_djangos_health_check_replaces_it():
    """The same for every other request: Django's per-request check (Django's own SQLite
    backend calls every connection usable, so it never replaced one there)."""
    from django.db import connection

    connection.ensure_connection()
    dropped = connection.connection
    try:
        dropped.close()
        assert not connection.is_usable()
        connection.health_check_done = False
        connection.close_if_health_check_failed()
        assert connection.connection is None
        assert Server.objects.count() == 0  # on a new connection
    finally:
        if connection.connection is dropped:
            connection.close()


def test_heartbeats_are_counted_for_metrics(
    applied, agent_token, post_digest, post_report, settings
):
    from integrations.models import ReportOutcomeCount
    from integrations.services.outcomes import outcome_buffer

    settings.ATLAS_METRICS_TOKEN = "metrics-token"
    settings.ATLAS_METRICS_FLUSH_S = 0
    assert post_digest(f"sha256:{report_digest(applied)}", agent_token).status_code == 200
    assert post_report(applied, agent_token).status_code == 202
    assert post_digest("sha256:" + "0" * 64, agent_token).status_code == 409
    outcome_buffer.flush()
    counts = {(r.outcome, r.status_code): r.count for r in ReportOutcomeCount.objects.all()}
    assert counts == {("unchanged", 200): 1, ("unchanged", 202): 1, ("rejected", 409): 1}
