"""Declared tables: each list's columns once, for the HTML table and the CSV export alike.

A `Column` names its header, the row's value (the CSV cell, and the page's text unless the
column draws richer HTML), its sort key and its link. A `Table` is the list of them with the
table's id and empty text. `table_page` applies the `?sort=` whitelist, paginates, renders
`core/table.html` through the page's template, or streams CSV of the whole filtered set:
the export's columns are the page's columns, so the two cannot drift apart.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.template.defaultfilters import date as date_filter
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString

from .formats import dash
from .forms import FilterForm, filter_form
from .paginator import DeferredJoinPaginator

PAGE_SIZES = (25, 50, 100, 500)

Row = Any


@dataclass(frozen=True)
class Column:
    """One column: `value` is the CSV cell and, by default, the page's text (— for nothing).

    `cell` draws the page's HTML when it says more than the value (badges, units); `link`
    wraps the text in a link; `title` is the cell's tooltip. Agent-supplied text is escaped
    everywhere: `cell` builds with `format_html`.
    """

    header: str
    value: Callable[[Row], Any]
    sort: str | None = None  # an ORM ordering expression, e.g. "hostname" or "gpu_count"
    link: Callable[[Row], str | None] | None = None
    cell: Callable[[Row], Any] | None = None
    title: Callable[[Row], Any] | None = None
    numeric: bool = False
    mono: bool = False

    @property
    def css(self) -> str:
        return " ".join(c for c, on in (("num", self.numeric), ("mono", self.mono)) if on)

    def html(self, row: Row) -> SafeString:
        if self.cell is not None:
            return conditional_escape(self.cell(row))
        text = dash(self.value(row))
        url = self.link(row) if self.link else None
        if url:
            return format_html('<a href="{}">{}</a>', url, text)
        return conditional_escape(text)


@dataclass(frozen=True)
class Cell:
    html: SafeString
    css: str = ""
    title: Any = None


@dataclass(frozen=True)
class HtmlRow:
    cells: list[Cell]
    css: str = ""


@dataclass(frozen=True)
class Table:
    """A list page's table: its columns, element id, CSV file name, default sort, empty states."""

    id: str
    columns: Sequence[Column]
    filename: str
    default_sort: str = ""
    """The list page's sort when `?sort=` names none (a `tables_page` table keeps its rows'
    order: none)."""
    empty: str = "Nothing matches."
    noun: str = "rows"
    """The plural the empty state names: "No servers match …" (templates/_empty_state.html)."""
    clear: str = ""
    """The URL that clears the filters; the page itself when empty."""
    row_class: Callable[[Row], str] | None = None
    sorts: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sorts", frozenset(c.sort for c in self.columns if c.sort))

    @property
    def headers(self) -> list[str]:
        return [c.header for c in self.columns]

    def csv_row(self, row: Row) -> list[Any]:
        return [csv_cell(c.value(row)) for c in self.columns]

    def html_rows(self, rows: Iterable[Row]) -> list[HtmlRow]:
        return [
            HtmlRow(
                cells=[
                    Cell(c.html(row), c.css, c.title(row) if c.title else None)
                    for c in self.columns
                ],
                css=self.row_class(row) if self.row_class else "",
            )
            for row in rows
        ]


def csv_cell(value: Any) -> Any:
    """A CSV cell: booleans as true/false, nothing as empty, and a quote before formula-like
    text so spreadsheets show it instead of running it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def when(value: Any) -> str:
    """A moment as a table cell shows it (`2026-11-30 07:00`, in the current time zone); the
    CSV takes the ISO form (`iso`)."""
    return date_filter(value, "Y-m-d H:i") if value else "—"


def iso(value: Any) -> str:
    return value.isoformat() if value else ""


class _Echo:
    def write(self, value: str) -> str:
        return value


def csv_response(table: Table, rows: Iterable[Row]) -> StreamingHttpResponse:
    """Stream the whole set as CSV, the table's columns in the page's order."""
    writer = csv.writer(_Echo())

    def lines() -> Iterator[str]:
        yield writer.writerow(table.headers)
        for row in rows:
            yield writer.writerow(table.csv_row(row))

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{table.filename}"'
    return response


def sort_queryset(request: HttpRequest, queryset: QuerySet, table: Table) -> tuple[QuerySet, str]:
    sort = request.GET.get("sort", table.default_sort)
    if sort.lstrip("-") not in table.sorts:
        sort = table.default_sort
    return queryset.order_by(sort, "pk"), sort


def paginate(request: HttpRequest, queryset: QuerySet, default_size: int = 50):
    try:
        size = int(request.GET.get("page_size", default_size))
    except ValueError:
        size = default_size
    size = size if size in PAGE_SIZES else default_size
    return DeferredJoinPaginator(queryset, size).get_page(request.GET.get("page"))


def query_without(request: HttpRequest, *keys: str) -> str:
    """The current query string without some keys, for sort and page links."""
    params = request.GET.copy()
    for key in keys:
        params.pop(key, None)
    return params.urlencode()


def table_page(
    request: HttpRequest,
    *,
    table: Table,
    filterset: Any,
    template: str,
    filters: FilterForm | None = None,
    known: Callable[[], dict[str, Sequence[Any]]] | None = None,
    context: Callable[[], dict[str, Any]] | None = None,
    prepare: Callable[[list], list] | None = None,
) -> HttpResponse | StreamingHttpResponse:
    """A list page: `?sort=`, then `?format=csv` of the whole set, or one page rendered.

    `filterset` (a bound django-filter FilterSet) gives the rows, and with `filters` the
    page's filter form (`known`: the values of its dropdowns of known values);
    `prepare` adds what rows need beyond the query (it sees one page, or the whole export);
    `known` and `context` are called only for the HTML page, so an export runs none of
    their queries.
    """
    queryset, sort = sort_queryset(request, filterset.qs, table)
    if request.GET.get("format") == "csv":
        rows = prepare(list(queryset)) if prepare else queryset.iterator(chunk_size=2000)
        return csv_response(table, rows)
    page = paginate(request, queryset)
    page.object_list = prepare(list(page.object_list)) if prepare else list(page.object_list)
    return render(
        request,
        template,
        {
            "page": page,
            "table": table,
            "rows": table.html_rows(page.object_list),
            "filter_form": filter_form(filterset, filters, known() if known else None),
            "sort": sort,
            "query": query_without(request, "page", "format"),
            "sort_query": query_without(request, "page", "format", "sort"),
            **(context() if context else {}),
        },
    )


@dataclass(frozen=True)
class ShownTable:
    """One of several tables of a page, rendered: its declaration, its rows, its CSV query."""

    table: Table
    rows: list[HtmlRow]
    csv_query: str


def tables_page(
    request: HttpRequest,
    *,
    tables: Mapping[str, tuple[Table, Callable[[], Iterable[Row]]]],
    template: str,
    context: Callable[[], dict[str, Any]] | None = None,
) -> HttpResponse | StreamingHttpResponse:
    """A page of several tables in a fixed order (rankings, summaries), neither sorted nor
    paginated: each rendered under its name (`tables.<name>` in the template, drawn by
    `core/table.html` with `static=True`), or `?format=csv&table=<id>` streams that one table's
    rows with the page's columns. An export reads only its table's rows, and runs no `context`;
    an unknown table id is a 404.
    """
    if request.GET.get("format") == "csv":
        wanted = request.GET.get("table", "")
        for table, rows in tables.values():
            if table.id == wanted:
                return csv_response(table, rows())
        raise Http404("no such table on this page")
    shown = {
        name: ShownTable(
            table=table,
            rows=table.html_rows(rows()),
            csv_query=urlencode({"format": "csv", "table": table.id}),
        )
        for name, (table, rows) in tables.items()
    }
    return render(request, template, {"tables": shown, **(context() if context else {})})
