"""DRF page-number pagination with a client-chosen page size (up to 1,000).

`DeferredJoinPagination` is the same pages, sent as a deferred join: the page's ids are
picked first by a lean query (the filters and the order, no per-row annotations), then only
those rows are read with their annotations. A plain `OFFSET 129800 LIMIT 100` evaluates every
skipped row's select list too: at 130k nodes the nodes list's subqueries (GPU count, open
findings, worst severity) made a deep page take 3 s (bench/nodes_list.py).
"""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from rest_framework.pagination import PageNumberPagination


class AtlasPagination(PageNumberPagination):
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000


class DeferredJoinPaginator(Paginator):
    """Django's paginator, whose pages of a queryset read their rows by id: one query still
    (`WHERE id IN (SELECT id ... ORDER BY ... LIMIT ... OFFSET ...)`), in the same order."""

    def page(self, number: Any) -> Page:
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:
            top = self.count
        rows = self.object_list
        if isinstance(rows, QuerySet) and not rows.query.combinator:
            ids = rows.values("pk")[bottom:top]
            return Page(rows.filter(pk__in=ids), number, self)
        return Page(rows[bottom:top], number, self)


class DeferredJoinPagination(AtlasPagination):
    """AtlasPagination for lists whose rows carry costly annotations (the nodes list)."""

    django_paginator_class = DeferredJoinPaginator
