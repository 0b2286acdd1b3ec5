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
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render

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


def table_page(
    request: HttpRequest,
    *,
    queryset: QuerySet,
    columns: list[Column],
    default_sort: str,
    template: str,
    filename: str,
    context: Callable[[], dict[str, Any]] | None = None,
    prepare: Callable[[list], list] | None = None,
) -> HttpResponse:
    """A list page: `?sort=`, then `?format=csv` of the whole set, or one page rendered.

    `prepare` adds what rows need beyond the query (it sees one page, or the whole export);
    `context` is called only for the HTML page, so an export runs none of its queries.
    """
    queryset, sort = sort_queryset(request, queryset, columns, default_sort)
    if request.GET.get("format") == "csv":
        rows = prepare(list(queryset)) if prepare else queryset.iterator(chunk_size=2000)
        return csv_response(filename, columns, rows)
    page = paginate(request, queryset)
    if prepare:
        page.object_list = prepare(list(page.object_list))
    return render(
        request,
        template,
        {
            "page": page,
            "columns": columns,
            "sort": sort,
            "query": query_without(request, "page", "format"),
            "sort_query": query_without(request, "page", "format", "sort"),
            **(context() if context else {}),
        },
    )
