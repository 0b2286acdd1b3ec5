"""Repeated heartbeats answered from the web process's memory (issue 27): no statement while
the token's hit is remembered, last_seen written in bulk by a flush, and every miss (revoked,
unbound, another digest, expired) back on the statement within its bound. Runs on SQLite and,
with DATABASE_URL=postgres://..., on PostgreSQL."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import DatabaseError, InterfaceError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent.schema import report_digest
from inventory.models import AgentToken, Server
from inventory.services import (
    agent_token_unbind,
    heartbeat_flush,
    heartbeat_memory,
    heartbeat_memory_disable,
    heartbeat_memory_enable,
)
from inventory.services import heartbeat as heartbeat_module
from inventory.services.tokens import agent_token_revoke
from tests.heartbeats import LONG_AGO, SEND_REPORT, UNKNOWN, remember_heartbeats, seen, unchanged
from tests.reports import make_report

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def memory(settings):
    """Every test here with the web process's memory on."""
    remember_heartbeats(settings)


@pytest.fixture
def clock(monkeypatch):
    """time.monotonic as heartbeat_memory.py reads it (and nothing else does), moved on by hand."""
    now = [1000.0]
    monkeypatch.setattr(heartbeat_memory, "time", SimpleNamespace(monotonic=lambda: now[0]))
    return now


def _remembered(reporting, post_heartbeat, name: str):
    """A server whose token's hit is remembered: its first heartbeat ran the statement."""
    key, report, server = reporting(name)
    assert post_heartbeat(key, digest=report_digest(report)).status_code == 200
    Server.objects.filter(pk=server.pk).update(last_seen=LONG_AGO)
    return key, report, server


def _wait_for_the_flusher(server: Server, timeout_s: float = 10) -> None:
    """Until the flusher thread wrote the server's last_seen (or `timeout_s` passed)."""
    deadline = time.monotonic() + timeout_s
    while seen(server) == LONG_AGO and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_repeated_heartbeat_is_no_statement_and_the_flush_writes_its_last_seen(
    reporting, post_heartbeat
):
    key, report, server = _remembered(reporting, post_heartbeat, "mem-01")
    before = timezone.now()
    with CaptureQueriesContext(connection) as ctx:
        answer = post_heartbeat(key, digest=report_digest(report))
    assert answer.status_code == 200
    assert answer.json() == unchanged(server)
    assert not ctx.captured_queries
    assert seen(server) == LONG_AGO  # pending until the flush
    with CaptureQueriesContext(connection) as ctx:
        assert heartbeat_flush() == 1
    assert len(ctx.captured_queries) == 1
    assert seen(server) >= before
    assert heartbeat_flush() == 0  # nothing pending: no statement


def test_an_unchanged_full_report_is_parsed_and_hashed_with_no_statement(reporting, post_heartbeat):
    key, report, server = _remembered(reporting, post_heartbeat, "mem-02")
    body = json.dumps({**report, "collected_at": "2031-01-01T00:00:00Z"}).encode()
    with CaptureQueriesContext(connection) as ctx:
        answer = post_heartbeat(key, body=body)
    assert answer.status_code == 202 and answer.json()["status"] == "unchanged"
    assert not ctx.captured_queries
    heartbeat_flush()
    assert seen(server) > LONG_AGO


def test_one_flush_writes_every_pending_server_in_one_statement(reporting, post_heartbeat):
    servers = []
    for n in range(3):
        key, report, server = _remembered(reporting, post_heartbeat, f"mem-1{n}")
        assert post_heartbeat(key, digest=report_digest(report)).status_code == 200
        servers.append(server)
    with CaptureQueriesContext(connection) as ctx:
        assert heartbeat_flush() == 3
    assert len(ctx.captured_queries) == 1
    assert all(seen(server) > LONG_AGO for server in servers)


def test_a_flush_never_moves_last_seen_backwards(reporting, post_heartbeat):
    key, report, server = _remembered(reporting, post_heartbeat, "mem-03")
    assert post_heartbeat(key, digest=report_digest(report)).status_code == 200
    later = timezone.now() + timedelta(minutes=5)  # a report applied since, say
    Server.objects.filter(pk=server.pk).update(last_seen=later)
    heartbeat_flush()
    assert seen(server) == later


def test_a_token_revoked_in_this_process_is_refused_at_once(reporting, post_heartbeat):
    key, report, server = _remembered(reporting, post_heartbeat, "mem-04")
    agent_token_revoke(token=AgentToken.objects.get(server=server))
    answer = post_heartbeat(key, digest=report_digest(report))
    assert answer.status_code == 401 and answer.json() == UNKNOWN
    assert heartbeat_flush() == 0 and seen(server) == LONG_AGO


def test_a_token_unbound_in_this_process_is_asked_for_its_report(reporting, post_heartbeat):
    key, report, server = _remembered(reporting, post_heartbeat, "mem-05")
    agent_token_unbind(token=AgentToken.objects.get(server=server))
    answer = post_heartbeat(key, digest=report_digest(report))
    assert answer.status_code == 409 and answer.json() == SEND_REPORT


def test_a_token_revoked_elsewhere_is_refused_once_its_memory_expires(
    reporting, post_heartbeat, clock
):
    """Another process's revocation (here: the row alone) takes effect within
    ATLAS_HEARTBEAT_CACHE_S, when this process runs the statement again."""
    key, report, server = _remembered(reporting, post_heartbeat, "mem-06")
    AgentToken.objects.filter(server=server).update(revoked_at=timezone.now())
    clock[0] += 4.9
    assert post_heartbeat(key, digest=report_digest(report)).status_code == 200  # within the bound
    clock[0] += 0.2
    answer = post_heartbeat(key, digest=report_digest(report))
    assert answer.status_code == 401 and answer.json() == UNKNOWN


def test_an_expired_memory_runs_the_statement_which_writes_last_seen(
    reporting, post_heartbeat, clock
):
    key, report, server = _remembered(reporting, post_heartbeat, "mem-07")
    clock[0] += 6
    with CaptureQueriesContext(connection) as ctx:
        assert post_heartbeat(key, digest=report_digest(report)).status_code == 200
    (sql,) = [q["sql"] for q in ctx.captured_queries]
    assert sql.startswith("UPDATE") and "RETURNING" in sql
    assert seen(server) > LONG_AGO


def test_another_digest_goes_to_the_statement_and_asks_for_the_report(reporting, post_heartbeat):
    key, report, _server = _remembered(reporting, post_heartbeat, "mem-08")
    changed = report_digest(make_report("mem-08", gpus=4))
    with CaptureQueriesContext(connection) as ctx:
        answer = post_heartbeat(key, digest=changed)
    assert answer.status_code == 409 and answer.json() == SEND_REPORT
    assert len(ctx.captured_queries) == 2
    assert post_heartbeat(key, digest=report_digest(report)).status_code == 200  # remembered again


def test_a_changed_report_received_here_forgets_the_token(reporting, post_heartbeat, post_report):
    key, report, _server = _remembered(reporting, post_heartbeat, "mem-09")
    changed = make_report("mem-09", gpus=4)
    assert post_report(changed, key).json()["status"] == "pending"
    with CaptureQueriesContext(connection) as ctx:
        answer = post_heartbeat(key, digest=report_digest(report))
    assert answer.status_code == 409  # the old digest is the statement's to judge: changed
    assert ctx.captured_queries
    assert post_heartbeat(key, digest=report_digest(changed)).status_code == 200


def test_without_the_memory_every_heartbeat_is_the_statement(reporting, post_heartbeat, settings):
    settings.ATLAS_HEARTBEAT_CACHE_S = 0
    key, report, server = reporting("mem-10")
    for _ in range(2):
        Server.objects.filter(pk=server.pk).update(last_seen=LONG_AGO)
        with CaptureQueriesContext(connection) as ctx:
            assert post_heartbeat(key, digest=report_digest(report)).status_code == 200
        assert len(ctx.captured_queries) == 1
        assert seen(server) > LONG_AGO
    assert heartbeat_flush() == 0


@pytest.mark.parametrize("error", [DatabaseError, InterfaceError])  # neither is the other's kind
def test_a_failed_flush_keeps_the_values_for_the_next(
    reporting, post_heartbeat, monkeypatch, error
):
    key, report, server = _remembered(reporting, post_heartbeat, "mem-11")
    assert post_heartbeat(key, digest=report_digest(report)).status_code == 200

    def broken(items):
        raise error("connection lost")

    monkeypatch.setattr(heartbeat_module, "_write_seen", broken)
    with pytest.raises(error):
        heartbeat_flush()
    monkeypatch.undo()
    assert heartbeat_flush() == 1
    assert seen(server) > LONG_AGO


@pytest.mark.django_db(transaction=True)
def test_the_flusher_thread_writes_last_seen_on_its_own(reporting, post_heartbeat, settings):
    """The web process's way (config/wsgi.py): the first heartbeat answered from memory starts
    the daemon thread, which writes last_seen on its own connection within the interval."""
    settings.ATLAS_HEARTBEAT_FLUSH_S = 0.2
    heartbeat_memory_enable(flusher=True)
    key, report, server = _remembered(reporting, post_heartbeat, "mem-thread")
    before = timezone.now()
    assert post_heartbeat(key, digest=report_digest(report)).status_code == 200
    flusher = heartbeat_memory.flusher()
    assert flusher is not None and flusher.is_alive()
    _wait_for_the_flusher(server)
    assert seen(server) >= before
    heartbeat_memory_disable()  # a reset ends the thread at its next wake, its connection closed
    flusher.join(timeout=5)
    assert not flusher.is_alive()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("where", "error"),
    [("_write_seen", InterfaceError), ("heartbeat_flush", RuntimeError)],
    ids=["connection-lost", "not-a-database-error"],
)
def test_the_flusher_thread_outlives_a_failed_flush(
    reporting, post_heartbeat, settings, monkeypatch, where, error
):
    """A flush that fails (a dropped connection; anything else) costs the thread nothing: the
    values wait, and the next flush writes them."""
    settings.ATLAS_HEARTBEAT_FLUSH_S = 0.2
    heartbeat_memory_enable(flusher=True)
    key, report, server = _remembered(reporting, post_heartbeat, "mem-survive")
    real = getattr(heartbeat_module, where)
    failures = []

    def fail_once(*args):
        if not failures:
            failures.append(error)
            raise error("connection lost")
        return real(*args)

    monkeypatch.setattr(heartbeat_module, where, fail_once)
    before = timezone.now()
    assert post_heartbeat(key, digest=report_digest(report)).status_code == 200
    flusher = heartbeat_memory.flusher()
    _wait_for_the_flusher(server)
    assert failures == [error]
    assert flusher.is_alive()
    assert seen(server) >= before
    heartbeat_memory_disable()
    flusher.join(timeout=5)
