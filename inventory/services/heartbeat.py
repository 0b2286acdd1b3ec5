"""A heartbeat in one round trip: the live, bound token's server is marked seen where its last
applied report has the digest the agent names, in one `UPDATE ... FROM ... RETURNING`.

Nearly all of an agent's traffic is heartbeats, and looking the token up before touching its
server doubled their cost (issue 27). This statement authenticates (the key's digest, not
revoked), confines (a token touches only the server it is bound to: NodeRestriction's rule,
as `_heartbeat_possible` states it) and compares the digest at once. No row says only "not a
plain heartbeat": the caller then looks the token up (`agent_token_state`) to answer which
miss it was, exactly as before. `last_seen` is written on every hit, as the per-heartbeat
floor writes it: a fleet's agents beat every 30 s each, so a write coalesced per server over
a few seconds would save nothing there.

PostgreSQL and SQLite (3.35 or later, for RETURNING) run the same text; any other backend
gets None, and with it the two statements of the miss path.
"""

from __future__ import annotations

import sqlite3
from functools import cache
from typing import Any

from django.db import connection
from django.utils import timezone

from ..models import AgentToken, Server
from .ingest import ReceiveResult
from .tokens import _usable, token_digest

_SQLITE_RETURNING = (3, 35, 0)


def heartbeat_seen(*, key: str, digest: str) -> ReceiveResult | None:
    """Mark the server of the live, bound token for `key` seen when its last applied report's
    digest is `digest` (hex, as `parse_digest` or `heartbeat_digest` give it): one statement.
    None for any miss (unknown, revoked or unbound token, another digest) and on a backend
    without `UPDATE ... RETURNING`; the caller then says which, as before."""
    sql = _seen_by_digest_sql(connection.vendor)
    if sql is None or not digest or not _usable(key):
        return None
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with _cursor() as cursor:
        cursor.execute(sql, [now, token_digest(key), digest])
        row = cursor.fetchone()
    if row is None:
        return None
    server_id, last_report_id = row
    return ReceiveResult(report_id=last_report_id, status="unchanged", server_id=server_id)


def _cursor():
    """A cursor of Django's connection (logged and its errors wrapped as any other); on
    PostgreSQL one that binds on the server: the parameters travel beside the statement
    instead of being quoted into it in Python (Django's default: about 50 of the 160 us of
    CPU this statement took, measured in-process). Not prepared: that stays off, as Django
    keeps it, for connection poolers."""
    if connection.vendor != "postgresql":
        return connection.cursor()
    from django.db.backends.postgresql.base import ServerBindingCursor

    connection.validate_thread_sharing()
    connection.ensure_connection()
    binding: Any = ServerBindingCursor  # django-stubs knows neither its arguments nor its kind
    raw = binding(connection.connection)
    if connection.queries_logged:
        return connection.make_debug_cursor(raw)
    return connection.make_cursor(raw)


@cache
def _seen_by_digest_sql(vendor: str) -> str | None:
    """The statement's text, from the models' names, once per process; None where the
    backend cannot run it."""
    if vendor == "sqlite" and sqlite3.sqlite_version_info < _SQLITE_RETURNING:
        return None
    if vendor not in ("postgresql", "sqlite"):
        return None
    q = connection.ops.quote_name
    server, token = Server._meta, AgentToken._meta

    def name(meta, field: str) -> str:
        return q(meta.get_field(field).column)

    def col(meta, field: str) -> str:
        return f"{q(meta.db_table)}.{name(meta, field)}"

    # Names from the models, quoted; the values are parameters. `identity <> ''` is also
    # false for NULL: a token not bound to a server yet never hits.
    return (
        f"UPDATE {q(server.db_table)} SET {name(server, 'last_seen')} = %s "  # noqa: S608
        f"FROM {q(token.db_table)} "
        f"WHERE {col(token, 'key_hash')} = %s AND {col(token, 'revoked_at')} IS NULL "
        f"AND {col(token, 'identity')} <> '' AND {col(token, 'server')} = {col(server, 'id')} "
        f"AND {col(server, 'last_report_hash')} = %s "
        f"RETURNING {col(server, 'id')}, {col(server, 'last_report')}"
    )
