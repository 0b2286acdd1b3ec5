"""Deferred-join pages from the nearer end (core/paginator.py): the same rows in the same
order as a plain slice, from the front and from the back, ties and NULLs included."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from core.paginator import DeferredJoinPaginator
from inventory.models import Server

pytestmark = pytest.mark.django_db


@pytest.fixture
def servers() -> None:
    # Ties in the hostname and NULL racks: only `pk` makes the order total.
    Server.objects.bulk_create(
        Server(
            identity=f"hostname:srv-{i:03d}",
            hostname=f"srv-{i % 7}",
            rack="" if i % 3 else f"rack-{i % 4}",
        )
        for i in range(53)
    )


def pages(queryset, per_page: int) -> list[list[int]]:
    paginator = DeferredJoinPaginator(queryset, per_page)
    return [[s.pk for s in paginator.page(n).object_list] for n in paginator.page_range]


@pytest.mark.parametrize(
    "ordering",
    [
        ("hostname",),
        ("-hostname",),
        ("rack", "-hostname"),
        (F("rack").desc(nulls_first=True), "hostname"),
        ("hostname", "-id"),
    ],
)
def test_every_page_holds_the_rows_of_a_plain_slice(servers, ordering):
    rows = Server.objects.order_by(*ordering, "pk")
    expected = [s.pk for s in rows]
    for per_page in (5, 10, 50):
        got = pages(Server.objects.order_by(*ordering), per_page)
        assert [pk for page in got for pk in page] == expected
        assert all(len(page) == per_page for page in got[:-1])


def test_the_last_page_is_picked_from_the_back(servers):
    """The last page's ids come from the reversed order with a small OFFSET (not 50)."""
    paginator = DeferredJoinPaginator(Server.objects.order_by("hostname"), 5)
    with CaptureQueriesContext(connection) as ctx:
        last = list(paginator.page(paginator.num_pages).object_list)
    select = [q["sql"] for q in ctx.captured_queries if "COUNT" not in q["sql"]]
    assert len(select) == 1
    assert "DESC" in select[0]
    assert "OFFSET 50" not in select[0]
    assert [s.pk for s in last] == [s.pk for s in Server.objects.order_by("hostname", "pk")][50:]


@pytest.mark.filterwarnings("ignore::django.core.paginator.UnorderedObjectListWarning")
def test_an_unordered_list_is_paged_by_id(servers):
    got = pages(Server.objects.all().order_by(), 20)
    everyone = sorted(Server.objects.values_list("pk", flat=True))
    assert [pk for page in got for pk in page] == everyone
