"""A heartbeat in one round trip, or none: the live, bound token's server is marked seen where
its last applied report has the digest the agent names.

Nearly all of an agent's traffic is heartbeats (issue 27). The first heartbeat of a token in a
process is one `UPDATE ... FROM ... RETURNING`: it authenticates (the key's digest, not
revoked), confines (a token touches only the server it is bound to: NodeRestriction's rule,
as `_heartbeat_possible` states it), compares the digest and writes last_seen at once. A hit
is then remembered in this process for ATLAS_HEARTBEAT_CACHE_S seconds (key digest -> server,
last report, digest), and the token's later heartbeats with that digest are answered from
memory: no statement, no commit. Their "seen at" is kept in memory too, and every
ATLAS_HEARTBEAT_FLUSH_S seconds one bulk UPDATE per process writes all of them (a daemon
thread; and at the process's exit), never moving a last_seen backwards.

The bounds this buys, and what keeps them:

- last_seen is at most ATLAS_HEARTBEAT_FLUSH_S behind the last heartbeat (a process killed
  with SIGKILL loses at most that much of it; the stale and offline findings count minutes);
- a token revoked or unbound is refused at once by the process that revoked it
  (`heartbeat_forget`, called by the token services), and by the others within
  ATLAS_HEARTBEAT_CACHE_S, when their entry expires and the statement runs again;
- a digest other than the remembered one drops the entry and goes to the statement, so a
  changed report is asked for as before; a server whose report was applied elsewhere answers
  a heartbeat naming its previous digest "unchanged" for at most ATLAS_HEARTBEAT_CACHE_S.

With ATLAS_HEARTBEAT_CACHE_S=0 every heartbeat is the one statement, as before.

No row says only "not a plain heartbeat": the caller then looks the token up
(`agent_token_state`) to answer which miss it was, exactly as before. PostgreSQL and SQLite
(3.35 or later, for RETURNING) run the same text; any other backend gets None, and with it the
two statements of the miss path.
"""

from __future__ import annotations

import atexit
import logging
import sqlite3
import time
from datetime import datetime
from functools import cache
from typing import Any

from django.conf import settings
from django.db import Error, close_old_connections, connection
from django.db.models import Case, DateTimeField, Q, Value, When
from django.utils import timezone

from ..models import AgentToken, Server
from . import heartbeat_memory
from .ingest import ReceiveResult
from .tokens import _usable, token_digest

logger = logging.getLogger(__name__)

_SQLITE_RETURNING = (3, 35, 0)
_FLUSH_CHUNK = 1000  # servers per bulk UPDATE


def heartbeat_seen(*, key: str, digest: str) -> ReceiveResult | None:
    """Mark the server of the live, bound token for `key` seen when its last applied report's
    digest is `digest` (hex, as `parse_digest` or `heartbeat_digest` give it): from memory when
    this process saw the same hit less than ATLAS_HEARTBEAT_CACHE_S ago (last_seen then
    written by the next flush), else one statement.
    None for any miss (unknown, revoked or unbound token, another digest) and on a backend
    without `UPDATE ... RETURNING`; the caller then says which, as before."""
    if not digest or not _usable(key):
        return None
    key_hash = token_digest(key)
    known = heartbeat_memory.recall(key_hash, digest)
    if known is not None:
        if heartbeat_memory.mark_seen(known.server_id, timezone.now()):
            heartbeat_memory.flusher_start(_flush_forever)
        return ReceiveResult(
            report_id=known.last_report_id, status="unchanged", server_id=known.server_id
        )
    sql = _seen_by_digest_sql(connection.vendor)
    if sql is None:
        return None
    with _cursor() as cursor:
        cursor.execute(
            sql, [connection.ops.adapt_datetimefield_value(timezone.now()), key_hash, digest]
        )
        row = cursor.fetchone()
    if row is None:
        return None
    server_id, last_report_id = row
    heartbeat_memory.remember(
        key_hash,
        server_id=server_id,
        last_report_id=last_report_id,
        digest=digest,
        ttl_s=settings.ATLAS_HEARTBEAT_CACHE_S,
    )
    return ReceiveResult(report_id=last_report_id, status="unchanged", server_id=server_id)


def heartbeat_flush() -> int:
    """Write every pending last_seen in bulk (one UPDATE per _FLUSH_CHUNK servers), never
    moving one backwards; the number of servers written. On a database error (any
    `django.db.Error`: a dropped connection is an InterfaceError, not a DatabaseError) the values
    go back to pending (the newer one kept) for the next flush, and the error is raised."""
    pending = heartbeat_memory.take_pending()
    if not pending:
        return 0
    items = sorted(pending.items())
    try:
        for start in range(0, len(items), _FLUSH_CHUNK):
            _write_seen(items[start : start + _FLUSH_CHUNK])
    except Error:
        heartbeat_memory.restore_pending(pending)
        raise
    return len(items)


def _write_seen(items: list[tuple[int, datetime]]) -> None:
    if connection.vendor == "postgresql":
        with _cursor() as cursor:  # bound on the server: two arrays, not 2 x 1000 quoted values
            cursor.execute(_flush_sql(), [[i for i, _ in items], [s for _, s in items]])
        return
    seen = Case(
        *(When(pk=server_id, then=Value(at)) for server_id, at in items),
        output_field=DateTimeField(),
    )
    Server.objects.filter(Q(last_seen__isnull=True) | Q(last_seen__lt=seen)).filter(
        pk__in=[i for i, _ in items]
    ).update(last_seen=seen)


@cache
def _flush_sql() -> str:
    """PostgreSQL's bulk form: the ids and times as two arrays, one statement for all."""
    q = connection.ops.quote_name
    meta = Server._meta
    table, seen, pk = (
        q(meta.db_table),
        q(str(meta.get_field("last_seen").column)),
        q(str(meta.pk.column)),
    )
    return (
        f"UPDATE {table} SET {seen} = v.seen "  # noqa: S608  (names from the model)
        "FROM unnest(%s::bigint[], %s::timestamptz[]) AS v(id, seen) "
        f"WHERE {table}.{pk} = v.id AND ({table}.{seen} IS NULL OR {table}.{seen} < v.seen)"
    )


def _flush_forever(generation: int) -> None:
    """The daemon thread that flushes every ATLAS_HEARTBEAT_FLUSH_S (`flusher_start`), started
    by the first heartbeat answered from memory (so after gunicorn forked its workers)."""
    interval = max(0.1, float(settings.ATLAS_HEARTBEAT_FLUSH_S))
    while True:
        time.sleep(interval)
        if not heartbeat_memory.is_current(generation):  # a reset (tests, fork) ends this thread
            connection.close()  # this thread's own
            return
        try:
            _flush_logged()
        except Exception:  # whatever it was, the thread lives: no other one would replace it
            logger.exception("heartbeat flusher: a flush failed; the next one is in %s s", interval)


def _flush_logged() -> None:
    """A flush on this thread's own connection, which is closed when too old or broken; a
    database error is logged and its values wait for the next flush."""
    if not heartbeat_memory.has_pending():
        return
    close_old_connections()
    try:
        heartbeat_flush()
    except Error:
        logger.exception("heartbeat flush failed; the values wait for the next one")
        connection.close()


atexit.register(_flush_logged)


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
