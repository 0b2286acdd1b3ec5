"""The floor of bench/load.py: a bare WSGI app behind the same gunicorn, not part of the product.

It does what any heartbeat must and nothing else: look the agent token up (one indexed
query on the product's own table), parse the JSON body, hash it, upsert one row. No Django,
no middleware, one psycopg connection per thread (server-side prepared statements). Its
table is created by bench/load.py in the benchmark's own database.

    FLOOR_DATABASE_URL=postgres://... gunicorn --chdir bench floor_wsgi:application
"""

from __future__ import annotations

import hashlib
import json
import os
import threading

import psycopg

TOKEN_SQL = "SELECT id FROM inventory_agenttoken WHERE key_hash = %s AND revoked_at IS NULL"
UPSERT_SQL = (
    "INSERT INTO bench_floor_seen (token_id, content_hash, last_seen) VALUES (%s, %s, now()) "
    "ON CONFLICT (token_id) DO UPDATE SET content_hash = EXCLUDED.content_hash, "
    "last_seen = EXCLUDED.last_seen"
)
TABLE_SQL = (
    "CREATE TABLE IF NOT EXISTS bench_floor_seen (token_id bigint PRIMARY KEY, "
    "content_hash char(64) NOT NULL, last_seen timestamptz NOT NULL)"
)
_local = threading.local()


def _connection() -> psycopg.Connection:
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = psycopg.connect(os.environ["FLOOR_DATABASE_URL"], autocommit=True)
        _local.conn = conn
    return conn


def _answer(start_response, status: str, payload: bytes) -> list[bytes]:
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
    start_response(status, headers)
    return [payload]


def application(environ, start_response):
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    parts = environ.get("HTTP_AUTHORIZATION", "").split()
    if len(parts) != 2:
        return _answer(start_response, "401 Unauthorized", b'{"detail":"no token"}')
    conn = _connection()
    key_hash = hashlib.sha256(parts[1].encode()).hexdigest()
    row = conn.execute(TOKEN_SQL, (key_hash,)).fetchone()
    if row is None:
        return _answer(start_response, "401 Unauthorized", b'{"detail":"unknown token"}')
    json.loads(body)
    conn.execute(UPSERT_SQL, (row[0], hashlib.sha256(body).hexdigest()))
    return _answer(start_response, "202 Accepted", b'{"status":"unchanged"}')
