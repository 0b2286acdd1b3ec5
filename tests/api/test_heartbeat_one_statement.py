"""A heartbeat in one round trip (issue 27): an unchanged digest or an unchanged full report is
one statement that authenticates, confines and marks the server seen; every miss answers as
before, after a second query. Runs on SQLite and, with DATABASE_URL=postgres://..., on
PostgreSQL."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent.schema import report_digest
from inventory.models import AgentToken, Report
from inventory.services import heartbeat as heartbeat_module
from inventory.services import heartbeat_seen
from inventory.services.tokens import agent_token_revoke
from tests.heartbeats import LONG_AGO, SEND_REPORT, UNKNOWN, seen, unchanged
from tests.reports import make_report

pytestmark = pytest.mark.django_db


def _statements(ctx: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in ctx.captured_queries]


def test_an_unchanged_digest_is_one_statement_that_marks_the_server_seen(reporting, post_heartbeat):
    key, report, server = reporting("dgx-01")
    with CaptureQueriesContext(connection) as ctx:
        answer = post_heartbeat(key, digest=report_digest(report))
    assert answer.status_code == 200, answer.content
    assert answer.json() == unchanged(server)
    (sql,) = _statements(ctx)
    assert sql.startswith("UPDATE") and "RETURNING" in sql
    assert seen(server) > LONG_AGO
    assert Report.objects.count() == 1


def test_an_unchanged_full_report_is_one_statement_and_no_stored_report(reporting, post_heartbeat):
    key, report, server = reporting("dgx-02")
    body = json.dumps({**report, "collected_at": "2031-01-01T00:00:00Z"}).encode()
    with CaptureQueriesContext(connection) as ctx:
        answer = post_heartbeat(key, body=body)
    assert answer.status_code == 202, answer.content
    assert answer.json() == unchanged(server)
    assert len(_statements(ctx)) == 1
    assert seen(server) > LONG_AGO
    assert Report.objects.count() == 1


def test_a_changed_digest_asks_for_the_report_after_a_second_query(reporting, post_heartbeat):
    key, _, server = reporting("dgx-03")
    with CaptureQueriesContext(connection) as ctx:
        answer = post_heartbeat(key, digest=report_digest(make_report("dgx-03", gpus=4)))
    assert answer.status_code == 409 and answer.json() == SEND_REPORT
    assert len(_statements(ctx)) == 2
    assert seen(server) == LONG_AGO


@pytest.mark.parametrize("by_digest", [True, False])
def test_a_revoked_token_is_401_and_its_server_not_seen(reporting, post_heartbeat, by_digest):
    key, report, server = reporting("dgx-04")
    agent_token_revoke(token=AgentToken.objects.get(server=server))
    if by_digest:
        answer = post_heartbeat(key, digest=report_digest(report))
    else:
        answer = post_heartbeat(key, body=json.dumps(report).encode())
    assert answer.status_code == 401 and answer.json() == UNKNOWN
    assert answer["WWW-Authenticate"] == "Token"
    assert seen(server) == LONG_AGO


def test_a_token_touches_only_its_own_server(reporting, post_heartbeat):
    """NodeRestriction's rule: another server's digest is not this token's heartbeat."""
    key_a, _, server_a = reporting("dgx-05")
    _, report_b, server_b = reporting("dgx-06")
    answer = post_heartbeat(key_a, digest=report_digest(report_b))
    assert answer.status_code == 409 and answer.json() == SEND_REPORT
    assert seen(server_a) == LONG_AGO and seen(server_b) == LONG_AGO


def test_a_token_whose_binding_was_cleared_is_asked_for_the_report(reporting, post_heartbeat):
    key, report, server = reporting("dgx-07")
    AgentToken.objects.filter(server=server).update(identity=None)  # server kept: still no hit
    answer = post_heartbeat(key, digest=report_digest(report))
    assert answer.status_code == 409 and answer.json() == SEND_REPORT
    assert seen(server) == LONG_AGO


def test_a_malformed_digest_is_still_400_for_a_known_token_and_401_for_an_unknown(
    reporting, post_heartbeat
):
    key, _, _ = reporting("dgx-08")
    for token, expected in ((key, 400), ("caa_not-a-token", 401)):
        answer = post_heartbeat(token, header="sha256:xyz")
        assert answer.status_code == expected, answer.content


def test_heartbeat_seen_misses_without_a_query_for_an_unusable_key(reporting):
    _, report, _ = reporting("dgx-09")
    with CaptureQueriesContext(connection) as ctx:
        assert heartbeat_seen(key="caa_" + "x" * 300, digest=report_digest(report)) is None
        assert heartbeat_seen(key="", digest=report_digest(report)) is None
    assert not ctx.captured_queries


def test_a_sqlite_without_returning_answers_alike_in_two_statements(
    reporting, post_heartbeat, monkeypatch
):
    if connection.vendor != "sqlite":
        pytest.skip("the fallback is SQLite's")
    key, report, server = reporting("dgx-10")
    monkeypatch.setattr(heartbeat_module.sqlite3, "sqlite_version_info", (3, 34, 1))
    heartbeat_module._seen_by_digest_sql.cache_clear()
    try:
        with CaptureQueriesContext(connection) as ctx:
            answer = post_heartbeat(key, digest=report_digest(report))
    finally:
        monkeypatch.undo()
        heartbeat_module._seen_by_digest_sql.cache_clear()
    assert answer.status_code == 200 and answer.json()["status"] == "unchanged"
    assert [sql.split()[0] for sql in _statements(ctx)] == ["SELECT", "UPDATE"]
    assert seen(server) > LONG_AGO
