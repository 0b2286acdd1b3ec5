"""Every list, API and page, from its first page to its last (issue 27): the pages hold the
rows of the whole list in its order, each once, and the last page (its ids picked in the
reversed order, core/paginator.py) costs the queries the first one does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.models import Cluster, Node
from findings.models import Finding
from inventory.models import Gpu, Server
from workloads.models import Workload

pytestmark = pytest.mark.django_db

ROWS = 31  # two pages of 25 on a page, and a short last one of the API's page_size=7
API_LISTS = ["nodes", "servers", "gpus", "findings", "workloads"]
PAGES = ["/nodes/", "/servers/", "/gpus/", "/findings/", "/workloads/"]


@pytest.fixture
def lists() -> None:
    """ROWS of each, with ties in their default orders (names, severities, NULLs)."""
    _lists(ROWS)


def _lists(rows: int, tag: str = "") -> None:
    """`rows` of each list's rows (names carry `tag`, so a second call adds to the first)."""
    now = timezone.now()
    clusters = [Cluster.objects.create(name=f"c{tag}{c}", kind="slurm") for c in range(2)]
    servers = Server.objects.bulk_create(
        Server(identity=f"hostname:s{tag}{i:02d}", hostname=f"s{i % 5}") for i in range(rows)
    )
    Gpu.objects.bulk_create(
        Gpu(
            server=s,
            index=g,
            uuid=f"GPU-{s.pk}-{g}",
            name=("H100", "A100")[s.pk % 2],
            status="lost" if g else "ok",
        )
        for s in servers
        for g in range(2)
    )
    nodes = Node.objects.bulk_create(
        Node(
            cluster=clusters[i % 2],
            name=f"n{i:02d}",
            kind="slurm",
            state=("idle", "down", "mixed")[i % 3],
            state_flags=["DRAIN"] if i % 4 == 1 else [],
            server=servers[i] if i % 3 else None,
            first_seen=now,
            last_seen=now,
        )
        for i in range(rows)
    )
    Finding.objects.bulk_create(
        Finding(
            type="node_unavailable",
            severity=("warning", "critical")[i % 2],
            node=nodes[i % rows],
            subject=f"node:c{tag}/{i}",
            message="down",
            resolved_at=now if i % 4 == 0 else None,  # the page lists the open ones
        )
        for i in range(rows + rows // 2)
    )
    Workload.objects.bulk_create(
        Workload(
            cluster=clusters[i % 2],
            kind="slurm_job",
            scheduler_id=str(i),
            state="running",
            gpu_models=[["H100"], ["A100", "H100"]][i % 2],
        )
        for i in range(rows)
    )


def _get(client, url: str) -> tuple[Any, int]:
    response, sql = _get_sql(client, url)
    return response, len(sql)


def _get_sql(client, url: str) -> tuple[Any, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return response, [q["sql"] for q in captured.captured_queries]


def _skips(sql: list[str], rows: int) -> bool:
    """Whether a query skips `rows` rows (`OFFSET rows`): what the last page must not do."""
    return any(f"OFFSET {rows}" in q for q in sql)


def _api_ids(response) -> list[int]:
    return [row["id"] for row in json.loads(response.content)["results"]]


def _page_ids(response) -> list[int]:
    rows = response.context["page"].object_list
    return [row["pk"] if isinstance(row, dict) else row.pk for row in rows]


@pytest.mark.parametrize("name", API_LISTS)
def test_the_api_pages_hold_the_whole_list_and_the_last_costs_the_first_queries(api, lists, name):
    whole, _ = _get(api, f"/api/v1/{name}/?page_size=1000")
    everyone = _api_ids(whole)
    count = json.loads(whole.content)["count"]
    assert len(everyone) == count > 7
    pages = -(-count // 7)
    seen: list[int] = []
    queries: dict[int, int] = {}
    for number in range(1, pages + 1):
        response, sql = _get_sql(api, f"/api/v1/{name}/?page_size=7&page={number}")
        queries[number] = len(sql)
        seen += _api_ids(response)
    assert seen == everyone
    assert queries[pages] == queries[1]
    assert not _skips(sql, 7 * (pages - 1))  # the last page's ids came from the back


@pytest.mark.parametrize("url", PAGES)
def test_the_pages_hold_the_whole_list_and_the_last_costs_the_first_queries(
    client, user, lists, url
):
    client.force_login(user)
    whole, _ = _get(client, f"{url}?page_size=500")
    everyone = _page_ids(whole)
    assert len(everyone) > 25
    first, first_queries = _get(client, f"{url}?page_size=25")
    seen = _page_ids(first)
    pages = first.context["page"].paginator.num_pages
    for number in range(2, pages + 1):
        response, sql = _get_sql(client, f"{url}?page_size=25&page={number}")
        seen += _page_ids(response)
    assert seen == everyone
    assert len(sql) == first_queries  # the last page's
    assert not _skips(sql, 25 * (pages - 1))


def test_each_list_costs_the_same_queries_for_a_small_and_a_larger_fleet(api, client, user):
    """First and last pages, API and dashboard (their filter dropdowns included: walks of
    indexes, core/db/distinct.py), at 6 rows of each and at 6 + 60."""
    client.force_login(user)
    urls = [(api, f"/api/v1/{name}/?page_size=5") for name in API_LISTS]
    urls += [(client, f"{page}?page_size=25") for page in PAGES]

    def costs() -> list[int]:
        counts = []
        for caller, url in urls:
            first, queries = _get(caller, url)
            if first.get("Content-Type", "").startswith("application/json"):
                last = -(-json.loads(first.content)["count"] // 5)
            else:
                last = first.context["page"].paginator.num_pages
            counts += [queries, _get(caller, f"{url}&page={last}")[1]]
        return counts

    _lists(6)
    small = costs()
    _lists(60, tag="b")
    assert costs() == small
