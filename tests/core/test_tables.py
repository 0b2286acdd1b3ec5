"""Declared tables: the CSV export has the page's columns, in the page's order, and its cells
say booleans as true/false; the page escapes what agents report."""

from __future__ import annotations

import csv
import io
from types import SimpleNamespace

import pytest
from django.template.loader import render_to_string
from django.utils.html import format_html

from clusters.tables import NODE_TABLE
from core.tables import Column, Table, csv_cell
from findings.tables import finding_table
from health.tables import GPU_LIST_TABLE
from inventory.models import Server
from inventory.tables import SERVER_TABLE
from tests.pages.test_views import fleet
from tests.reports import apply_reports, make_report

TABLE = Table(
    id="things",
    filename="things.csv",
    default_sort="name",
    columns=(
        Column("Name", lambda r: r.name, "name", link=lambda r: f"/things/{r.id}/"),
        Column("Virtual", lambda r: r.virtual),
        Column("Count", lambda r: r.count, "count", numeric=True),
        Column(
            "State",
            lambda r: r.state,
            cell=lambda r: format_html('<span class="badge">{}</span>', r.state),
        ),
    ),
    row_class=lambda r: "mismatch" if r.count is None else "",
)


def test_csv_cells_say_booleans_as_true_and_false_and_nothing_as_empty():
    row = SimpleNamespace(id=1, name="dgx-01", virtual=True, count=None, state="ok")
    assert TABLE.csv_row(row) == ["dgx-01", "true", "", "ok"]
    assert csv_cell(False) == "false"
    assert csv_cell(0) == 0


def test_csv_cells_that_look_like_formulas_are_quoted():
    assert csv_cell("=cmd|' /C calc'!A0") == "'=cmd|' /C calc'!A0"
    assert csv_cell("-1") == "'-1"


def test_html_cells_escape_agent_text_link_and_draw_their_own_html():
    row = SimpleNamespace(id=7, name="<script>x</script>", virtual=False, count=None, state="<b>")
    (html_row,) = TABLE.html_rows([row])
    name, virtual, count, state = (cell.html for cell in html_row.cells)
    assert name == '<a href="/things/7/">&lt;script&gt;x&lt;/script&gt;</a>'
    assert virtual == "False"
    assert count == "—"  # nothing on the page, empty in the CSV
    assert state == '<span class="badge">&lt;b&gt;</span>'
    assert html_row.css == "mismatch"
    assert [cell.css for cell in html_row.cells] == ["", "", "num", ""]


def test_only_declared_sort_keys_are_sortable():
    assert TABLE.sorts == {"name", "count"}


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def _csv(client, path: str) -> list[list[str]]:
    response = client.get(path)
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def _page_headers(client, path: str, table_id: str) -> list[str]:
    response = client.get(path)
    assert response.context["table"].id == table_id
    return [c.header for c in response.context["table"].columns]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "table_id", "table"),
    [
        ("/servers/", "servers", SERVER_TABLE),
        ("/gpus/", "gpus", GPU_LIST_TABLE),
        ("/nodes/", "nodes", NODE_TABLE),
        ("/findings/", "findings", finding_table(open_only=True)),
        ("/findings/?open=false", "findings", finding_table(open_only=False)),
    ],
)
def test_every_list_exports_the_columns_its_page_shows(signed_in, path, table_id, table):
    fleet(2)
    headers = _page_headers(signed_in, path, table_id)
    assert headers == table.headers
    rows = _csv(signed_in, f"{path}{'&' if '?' in path else '?'}format=csv")
    assert rows[0] == headers
    assert all(len(row) == len(headers) for row in rows)
    body = signed_in.get(path).content.decode()
    for header in headers:
        assert f">{header}" in body  # each page header is drawn (some link to a sort)


@pytest.mark.django_db
def test_server_csv_carries_rack_position_and_virtual_as_true_false(signed_in):
    apply_reports(make_report("dgx-01", gpus=1), make_report("vm-01", gpus=1))
    Server.objects.filter(hostname="dgx-01").update(rack="r1", rack_position=12)
    Server.objects.filter(hostname="vm-01").update(is_virtual=True)
    rows = _csv(signed_in, "/servers/?format=csv")
    by_host = {row[0]: dict(zip(rows[0], row, strict=True)) for row in rows[1:]}
    assert (by_host["dgx-01"]["Rack"], by_host["dgx-01"]["U"]) == ("r1", "12")
    assert (by_host["dgx-01"]["Virtual"], by_host["vm-01"]["Virtual"]) == ("false", "true")


@pytest.mark.django_db
def test_resolved_findings_show_and_export_when_they_resolved(signed_in):
    assert "Resolved" not in finding_table(open_only=True).headers
    assert finding_table(open_only=False).headers[-1] == "Resolved"
    fleet(1)
    assert _csv(signed_in, "/findings/?open=false&format=csv")[0][-1] == "Resolved"


def test_a_static_table_has_no_sort_links_or_pages_and_says_its_own_empty_text(rf):
    rows = [SimpleNamespace(id=1, name="<b>dgx-01</b>", virtual=False, count=3, state="ok")]
    html = render_to_string(
        "core/table.html",
        {"table": TABLE, "rows": TABLE.html_rows(rows), "static": True},
        request=rf.get("/health/?search=x"),
    )
    assert "?sort=" not in html and "<th>Name</th>" in html
    assert "&lt;b&gt;dgx-01&lt;/b&gt;" in html
    empty = render_to_string(
        "core/table.html",
        {"table": TABLE, "rows": [], "static": True},
        request=rf.get("/health/?search=x"),
    )
    assert "Nothing matches." in empty and "empty-state" not in empty
    listed = render_to_string(
        "core/table.html",
        {"table": TABLE, "rows": [], "sort": "name", "sort_query": ""},
        request=rf.get("/things/?search=x"),
    )
    assert 'href="?sort=-name"' in listed and 'id="empty-state"' in listed
