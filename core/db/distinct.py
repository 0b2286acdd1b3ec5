"""The distinct values of one column, read by walking an index instead of the whole table.

A filter dropdown lists the values present (node states, GPU models): a handful, over a table
that grows with the fleet. `SELECT DISTINCT` reads every row: at 130k nodes and 200k GPUs each
of those dropdowns cost 50-80 ms of every page view (bench/lists.py). PostgreSQL 15 has no skip
scan, so `distinct_values` writes one as a recursive query (a "loose index scan"): the smallest
value, then the smallest one greater than the last, one index probe per distinct value. With a
B-tree index on the column whose condition the filter implies, it costs microseconds per value
at any fleet size. One query still, on any engine; SQLite gets a plain `SELECT DISTINCT`.

The rows' filter must name only the model's own table (no joins, though a relation read from
the model's own column, such as `server__isnull=False`, is fine): the walk repeats it in each
step. NULLs are left out (a dropdown has no use for them).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import EmptyResultSet, FullResultSet
from django.db import connections
from django.db.models import QuerySet


def distinct_values(rows: QuerySet, field: str) -> list[Any]:
    """The distinct non-NULL values of `field` among `rows`, ascending (the database's order
    for the column's type), in one query."""
    db = rows.db
    connection = connections[db]
    model_field = rows.model._meta.get_field(field)
    query = rows.order_by().query
    # Count only the tables still referenced: a join Django trims (`server__isnull=False` reads
    # the node's own `server_id`) stays in alias_map with a zero refcount. On every engine, so
    # tests catch a join.
    joined = sum(1 for alias in query.alias_map if query.alias_refcount[alias]) > 1
    if joined or query.is_sliced:
        raise ValueError("distinct_values walks one table: the rows' filter may not join")
    if connection.vendor != "postgresql":
        values = rows.exclude(**{f"{field}__isnull": True}).order_by(field)
        return list(values.values_list(field, flat=True).distinct())
    compiler = query.get_compiler(using=db)
    try:
        where, params = compiler.compile(query.where)
    except FullResultSet:
        where, params = "TRUE", []
    except EmptyResultSet:
        return []
    quote = connection.ops.quote_name
    table = quote(rows.model._meta.db_table)
    column = f"{table}.{quote(model_field.column)}"
    sql = (  # names quoted by the backend; values only as parameters
        f"WITH RECURSIVE walk(v) AS ("  # noqa: S608
        f"(SELECT {column} FROM {table} WHERE ({where}) AND {column} IS NOT NULL"
        f" ORDER BY {column} LIMIT 1)"
        f" UNION ALL SELECT (SELECT {column} FROM {table} WHERE ({where}) AND {column} > walk.v"
        f" ORDER BY {column} LIMIT 1) FROM walk WHERE walk.v IS NOT NULL"
        f") SELECT v FROM walk WHERE v IS NOT NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *params])
        found = [row[0] for row in cursor.fetchall()]
    convert = getattr(model_field, "from_db_value", None)
    return [convert(v, None, connection) for v in found] if convert else found
