"""Set-based writes of many rows with different values each.

Django's `bulk_update` builds one CASE WHEN per field with a branch per row, which
PostgreSQL evaluates row by row: the cost grows with rows x batch size. On PostgreSQL this
writes `UPDATE ... FROM (VALUES ...)` instead (linear: one join); elsewhere it falls back to
`bulk_update` in small batches.

`bulk_create` builds a model instance per row and prepares every value through its field:
at 400,000 cables that is most of an import's time. `insert_rows` takes plain rows and, on
PostgreSQL, sends one array per column (`INSERT ... SELECT FROM unnest(...)`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import Enum
from typing import Any

from django.db import connection, models
from django.db.models.options import Options

VALUES_BATCH = 5000
FALLBACK_BATCH = 200
INSERT_BATCH = 20000


def insert_rows(model: type[models.Model], rows: Sequence[dict[str, Any]]) -> None:
    """Insert plain rows (field attname -> value; the field's default for the rest) without
    a model instance per row; ids are not returned. Values must be what the column takes
    (str, numbers, datetimes, None; choices and JSON are converted here)."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(
            [model(**row) for row in rows], batch_size=FALLBACK_BATCH
        )
        return
    meta = model._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    quote = connection.ops.quote_name
    names = ", ".join(quote(_column_name(f)) for f in fields)
    arrays = ", ".join(f"%s::{f.cast_db_type(connection)}[]" for f in fields)
    sql = f"INSERT INTO {quote(meta.db_table)} ({names}) SELECT * FROM unnest({arrays})"  # noqa: S608
    with connection.cursor() as cursor:
        for start in range(0, len(rows), INSERT_BATCH):
            chunk = rows[start : start + INSERT_BATCH]
            cursor.execute(sql, [_column(field, chunk) for field in fields])


def _column_name(field: models.Field) -> str:
    """A concrete field's column (django-stubs types `column` as optional: a field that is
    not a column has none)."""
    if field.column is None:
        raise ValueError(f"{field} has no column")
    return field.column


def _field(meta: Options[Any], name: str) -> models.Field:
    """The model field `name` (a field, not a reverse relation)."""
    field = meta.get_field(name)
    if not isinstance(field, models.Field):
        raise ValueError(f"{meta.label}.{name} is not a field")
    return field


def _column(field: models.Field, rows: Sequence[dict[str, Any]]) -> list[Any]:
    name, default = field.attname, field.get_default()
    values = [row.get(name, default) for row in rows]
    if isinstance(field, models.JSONField):
        return [None if v is None else json.dumps(v, cls=field.encoder) for v in values]
    if isinstance(field, models.CharField):
        return [v.value if isinstance(v, Enum) else v for v in values]
    return values


def update_rows(model: type[models.Model], rows: Sequence[models.Model], fields: list[str]) -> None:
    """Write `fields` of each row (identified by its pk) in a handful of statements."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        model._default_manager.bulk_update(rows, fields, batch_size=FALLBACK_BATCH)
        return
    meta = model._meta
    columns = [_field(meta, name) for name in fields]
    pk = meta.pk
    table = connection.ops.quote_name(meta.db_table)
    quote = connection.ops.quote_name
    casts = [f"%s::{pk.db_type(connection)}"] + [
        f"%s::{column.cast_db_type(connection)}" for column in columns
    ]
    row_sql = "(" + ", ".join(casts) + ")"
    column_names = [_column_name(col) for col in columns]
    names = ", ".join(quote(c) for c in ["__id", *column_names])
    assignments = ", ".join(f"{quote(c)} = v.{quote(c)}" for c in column_names)
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
                f"WHERE {table}.{quote(_column_name(pk))} = v.{quote('__id')}"
            )
            cursor.execute(sql, params)
