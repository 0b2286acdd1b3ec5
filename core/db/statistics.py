"""Fresh planner statistics after a bulk change, so a bulk load is never left without any.

With 130k nodes bulk-loaded and no ANALYZE yet, one nodes page held a PostgreSQL backend at
100 % CPU for minutes: the planner guessed the table empty. Autovacuum catches up only after
its naptime and threshold; an apply that changed many rows refreshes the statistics of what
it changed itself, after commit (ANALYZE samples, so it stays cheap at any size), and vacuums
it there too (the visibility map: `_analyze`).
"""

from __future__ import annotations

import logging

from django.db import DatabaseError, connection, transaction
from django.db.models import Model

log = logging.getLogger(__name__)

BULK_ROWS = 1000
BULK_SHARE = 0.1
BULK_MIN = 100
"""Fewer rows than this are never a bulk change: a small table's statistics matter little,
and a 3-node snapshot should not cost an ANALYZE each time."""


def needs_analyze(*, changed: int, total: int) -> bool:
    """More than BULK_ROWS rows changed, or at least BULK_MIN and more than BULK_SHARE of the
    table as it was."""
    return changed > BULK_ROWS or (changed >= BULK_MIN and changed > BULK_SHARE * total)


def analyze_after_commit(model: type[Model], *, changed: int, total: int) -> bool:
    """`ANALYZE` the model's table once the caller's transaction commits, when `changed` (rows
    added, removed or rewritten) of `total` (rows before) is a bulk change. PostgreSQL only.
    Returns whether one was scheduled."""
    if connection.vendor != "postgresql" or not needs_analyze(changed=changed, total=total):
        return False
    table = model._meta.db_table
    transaction.on_commit(lambda: _analyze(table))
    return True


def _analyze(table: str) -> None:
    """`VACUUM (ANALYZE)` where it can run (outside any transaction, as after a commit), else
    `ANALYZE`. The vacuum also marks the new rows' pages all-visible, so the lists' exact
    counts and the dropdowns' index walks (core/db/distinct.py) read indexes alone, never the
    heap: at 130k nodes a nodes page's COUNT(*) fell from 60-90 ms to 20-40 ms (bench/lists.py).
    Fresh pages are cheap to vacuum; pages already all-visible are skipped. SKIP_LOCKED
    (PostgreSQL 12+): a table another session holds (another apply's vacuum, a migration) is
    skipped with a warning from the server, not waited for; autovacuum will catch up."""
    name = connection.ops.quote_name(table)
    if connection.in_atomic_block:
        sql = f"ANALYZE {name}"
    else:
        sql = f"VACUUM (ANALYZE, SKIP_LOCKED) {name}"
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
    except DatabaseError:
        # Statistics are an optimisation: the apply committed; autovacuum will catch up.
        log.warning("VACUUM/ANALYZE %s failed", table, exc_info=True)
