"""A heartbeat's UPDATE of last_seen stays a PostgreSQL HOT update: no index names the
column and the table keeps free room on each page (migration inventory 0005)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from inventory.models import Server
from inventory.services.ingest import _seen_sql
from tests.conftest import require

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _postgres_only():
    require(connection.vendor == "postgresql", "needs DATABASE_URL=postgres://... (HOT updates)")


def _one(sql: str, *params):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def test_no_index_names_last_seen_and_pages_keep_room():
    (indexes,) = _one(
        "select count(*) from pg_indexes where tablename = 'inventory_server'"
        " and indexdef like '%%last_seen%%'"
    )
    (options,) = _one("select reloptions from pg_class where relname = 'inventory_server'")
    assert indexes == 0 and "fillfactor=80" in (options or [])


def _heartbeats(servers: list[Server], rounds: int) -> int:
    """The number of HOT updates among `rounds` heartbeats of every server."""
    stats = "select n_tup_hot_upd from pg_stat_user_tables where relname = 'inventory_server'"
    _one("select pg_stat_force_next_flush()")
    (before,) = _one(stats)
    with connection.cursor() as cursor:
        for server in servers * rounds:
            cursor.execute(_seen_sql(connection.vendor), [timezone.now(), server.pk])
    _one("select pg_stat_force_next_flush()")
    (after,) = _one(stats)
    return after - before


def test_heartbeats_are_hot_updates_and_an_index_would_stop_that():
    servers = Server.objects.bulk_create(
        Server(identity=f"uuid:{i}", hostname=f"gpu{i:03d}") for i in range(50)
    )
    # Of 500: a third here (a few pages, pruned as they fill); 98% across 25,000 servers.
    assert _heartbeats(servers, rounds=10) >= 100
    with connection.cursor() as cursor:
        cursor.execute("create index seen on inventory_server (last_seen)")
    assert _heartbeats(servers, rounds=2) == 0
