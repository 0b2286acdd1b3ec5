"""Pages of a list sent as a deferred join, from whichever end of the list is nearer.

Every list's pages (the API's `AtlasPagination` and the dashboard's `core/tables.paginate`)
go through `DeferredJoinPaginator`: the page's ids are picked first by a lean query (the
filters and the order, no per-row annotations), then only those rows are read with their
annotations. A plain `OFFSET 129800 LIMIT 100` evaluates every skipped row's select list too:
at 130k nodes the nodes list's subqueries (GPU count, open findings, worst severity) made a
deep page take 3 s (bench/nodes_list.py), and at 13k nodes the GPU page's action judgement
made its last page take 9.6 s (bench/lists.py). A page in the back half of the list is picked
in the reversed order, so the last page skips a page's worth of rows, not the whole list:
with an index on the order (or a top-N sort without one) it costs what the first page does.
The order is made total (`pk` last) so that both directions agree on every row's place.
"""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import F, OrderBy, QuerySet


def total_order(rows: QuerySet) -> QuerySet:
    """`rows` in their order (the query's, else the model's) with `pk` last, if not there."""
    query = rows.query
    ordering = list(query.order_by or (query.default_ordering and rows.model._meta.ordering) or [])
    if ordering and _is_pk(ordering[-1]):
        return rows
    return rows.order_by(*ordering, "pk")


def _is_pk(term: Any) -> bool:
    if isinstance(term, str):
        return term.lstrip("-") in ("pk", "id")
    if isinstance(term, OrderBy) and isinstance(term.expression, F):
        return getattr(term.expression, "name", None) in ("pk", "id")
    return False


class DeferredJoinPaginator(Paginator):
    """Django's paginator, whose pages of a queryset read their rows by id: one query still
    (`WHERE id IN (SELECT id ... ORDER BY ... LIMIT ... OFFSET ...)`), in the same order,
    the ids of a page past the middle picked in the reversed order."""

    def page(self, number: Any) -> Page:
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:
            top = self.count
        rows = self.object_list
        if not isinstance(rows, QuerySet) or rows.query.combinator or rows.query.is_sliced:
            return Page(rows[bottom:top], number, self)
        rows = total_order(rows)
        if bottom > self.count - top:  # nearer the end: skip the rows after the page
            ids = rows.reverse().values("pk")[self.count - top : self.count - bottom]
        else:
            ids = rows.values("pk")[bottom:top]
        return Page(rows.filter(pk__in=ids), number, self)
