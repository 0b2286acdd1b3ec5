"""Django's SQLite backend, with an `is_usable()` that tells the truth.

Django's own answers True whatever the connection's state (a file has no server to drop
it), so a connection closed under Django is never replaced: not by the per-request health
check (DATABASE_CONN_HEALTH_CHECKS), not by `close_if_unusable_or_obsolete()` after an
error, and not by the heartbeat middleware's retry on a new connection
(inventory/api/middleware.py): the request that meets it is a 500, and so is every later
one in that thread. Here a closed or broken connection is unusable, as it is on PostgreSQL,
and is replaced the same way.
"""

from __future__ import annotations

import sqlite3

from django.db.backends.sqlite3 import base


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self) -> bool:
        try:
            self.connection.execute("SELECT 1")
        except sqlite3.Error:
            return False
        return True
