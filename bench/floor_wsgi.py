"""The floors of bench/load.py: a bare WSGI app behind the same gunicorn, not part of the product.

Each does the least any heartbeat must, in one statement on one round trip: look the agent
token up by its key's digest and touch a row with it. No Django, no middleware, one psycopg
connection per thread (server-side prepared statements).

- by digest (`X-Atlas-Report-Digest: sha256:<hex>`, empty body): the token's server marked
  seen where its last report's digest is the one named, on the product's own tables
  (`UPDATE ... FROM ... RETURNING`);
- the ceiling (`X-Bench-Ceiling`, any body): answered at once, nothing read: what this gunicorn
  and these clients can do at all on the machine, above any floor;
- a full report: its JSON parsed once and its facts hashed once (`agent.schema.report_digest`,
  the contract's digest: hashing the raw bytes could not tell an unchanged report whose
  `collected_at` moved from a changed one), then the same statement with that digest.

    FLOOR_DATABASE_URL=postgres://... gunicorn --chdir bench floor_wsgi:application
"""

from __future__ import annotations

import hashlib
import json
import os
import threading

import psycopg

from agent.schema import report_digest  # stdlib only: the one definition of the digest

SEEN_SQL = (
    "UPDATE inventory_server s SET last_seen = now() FROM inventory_agenttoken t "
    "WHERE t.key_hash = %s AND t.revoked_at IS NULL AND t.server_id = s.id "
    "AND s.last_report_hash = %s RETURNING s.id, s.last_report_id"
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
    if "HTTP_X_BENCH_CEILING" in environ:  # the machine's ceiling: no token, no database
        return _answer(start_response, "200 OK", b'{"status":"unchanged"}')
    parts = environ.get("HTTP_AUTHORIZATION", "").split()
    if len(parts) != 2:
        return _answer(start_response, "401 Unauthorized", b'{"detail":"no token"}')
    key_hash = hashlib.sha256(parts[1].encode()).hexdigest()
    header = environ.get("HTTP_X_ATLAS_REPORT_DIGEST")
    digest = header[7:].lower() if header is not None else report_digest(json.loads(body))
    row = _connection().execute(SEEN_SQL, (key_hash, digest)).fetchone()
    if row is None:
        return _answer(start_response, "409 Conflict", b'{"status":"send-report"}')
    if header is None:
        return _answer(start_response, "202 Accepted", b'{"status":"unchanged"}')
    return _answer(start_response, "200 OK", b'{"status":"unchanged"}')
