"""Set-based updates of many rows with different values each.

Django's `bulk_update` builds one CASE WHEN per field with a branch per row, which
PostgreSQL evaluates row by row: the cost grows with rows x batch size. On PostgreSQL this
writes `UPDATE ... FROM (VALUES ...)` instead (linear: one join); elsewhere it falls back to
`bulk_update` in small batches.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection, models

VALUES_BATCH = 5000
FALLBACK_BATCH = 200


def update_rows(model: type[models.Model], rows: Sequence[models.Model], fields: list[str]) -> None:
    """Write `fields` of each row (identified by its pk) in a handful of statements."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        model.objects.bulk_update(rows, fields, batch_size=FALLBACK_BATCH)
        return
    meta = model._meta
    columns = [meta.get_field(name) for name in fields]
    pk = meta.pk
    table = connection.ops.quote_name(meta.db_table)
    quote = connection.ops.quote_name
    casts = [f"%s::{pk.db_type(connection)}"] + [
        f"%s::{column.cast_db_type(connection)}" for column in columns
    ]
    row_sql = "(" + ", ".join(casts) + ")"
    names = ", ".join(quote(c) for c in ["__id", *(col.column for col in columns)])
    assignments = ", ".join(f"{quote(col.column)} = v.{quote(col.column)}" for col in columns)
    with connection.cursor() as cursor:
        for start in range(0, len(rows), VALUES_BATCH):
            chunk = rows[start : start + VALUES_BATCH]
            params: list = []
            for row in chunk:
                params.append(row.pk)
                params.extend(
                    col.get_db_prep_save(getattr(row, col.attname), connection) for col in columns
                )
            # Identifiers come from the model's own metadata, quoted; every value is a parameter.
            values = ", ".join([row_sql] * len(chunk))
            sql = (
                f"UPDATE {table} SET {assignments} FROM (VALUES {values}) AS v({names}) "  # noqa: S608
                f"WHERE {table}.{quote(pk.column)} = v.{quote('__id')}"
            )
            cursor.execute(sql, params)
