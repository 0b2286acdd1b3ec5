"""A bulk change's statistics refresh (core/db/statistics.py) on PostgreSQL: it never waits
for a table another session holds, and a refresh that fails is logged, never raised (the
apply it follows has committed)."""

from __future__ import annotations

import logging
import time

import pytest
from django.db import connection, connections

from core.db.statistics import _analyze
from tests.conftest import require

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _lock_timeout(value: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SET lock_timeout = '{value}'")


def test_a_table_another_session_holds_is_skipped_not_waited_for(caplog):
    require(connection.vendor == "postgresql", "needs DATABASE_URL=postgres://... (VACUUM)")
    other = connections.create_connection("default")
    other.set_autocommit(False)
    _lock_timeout("5s")  # a vacuum that waited would fail here, logged, after 5 s
    try:
        with other.cursor() as cursor:  # what a second vacuum of the table holds
            cursor.execute("LOCK TABLE clusters_node IN SHARE UPDATE EXCLUSIVE MODE")
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="core.db.statistics"):
            _analyze("clusters_node")
        assert time.monotonic() - started < 4
        assert not caplog.records
    finally:
        other.rollback()
        other.close()
        _lock_timeout("0")


def test_a_refresh_that_fails_is_logged_not_raised(caplog):
    require(connection.vendor == "postgresql", "needs DATABASE_URL=postgres://... (VACUUM)")
    with caplog.at_level(logging.WARNING, logger="core.db.statistics"):
        _analyze("no_such_table")
    assert [r.getMessage() for r in caplog.records] == ["VACUUM/ANALYZE no_such_table failed"]
