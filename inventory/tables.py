"""Sortable, paginated, exportable tables for the dashboard pages.

A page declares its columns once (label, sort key, CSV value); this module applies the
`?sort=` whitelist, paginates, and streams CSV of the whole filtered set.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, StreamingHttpResponse

PAGE_SIZES = (25, 50, 100, 500)


@dataclass(frozen=True)
class Column:
    label: str
    sort: str | None = None  # an ORM ordering expression, e.g. "hostname" or "gpu_count"
    csv: Callable[[Any], Any] | None = None  # value in the CSV export
    numeric: bool = False


class _Echo:
    def write(self, value: str) -> str:
        return value


def sort_queryset(
    request: HttpRequest, queryset: QuerySet, columns: Iterable[Column], default: str
) -> tuple[QuerySet, str]:
    allowed = {c.sort for c in columns if c.sort}
    sort = request.GET.get("sort", default)
    if sort.lstrip("-") not in allowed:
        sort = default
    return queryset.order_by(sort, "pk"), sort


def paginate(request: HttpRequest, queryset: QuerySet, default_size: int = 50):
    try:
        size = int(request.GET.get("page_size", default_size))
    except ValueError:
        size = default_size
    size = size if size in PAGE_SIZES else default_size
    return Paginator(queryset, size).get_page(request.GET.get("page"))


def csv_response(
    filename: str, columns: list[Column], rows: Iterable[Any]
) -> StreamingHttpResponse:
    """Stream the whole set as CSV; formula-like cells get a quote so spreadsheets show them."""
    writer = csv.writer(_Echo())
    exported = [c for c in columns if c.csv]

    def lines() -> Iterator[str]:
        yield writer.writerow([c.label for c in exported])
        for row in rows:
            yield writer.writerow([_cell(c.csv(row)) for c in exported])

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return "" if value is None else value


def query_without(request: HttpRequest, *keys: str) -> str:
    """The current query string without some keys, for sort and page links."""
    params = request.GET.copy()
    for key in keys:
        params.pop(key, None)
    return params.urlencode()
