"""The nodes list's pages, read by id after a lean query picks them (a deferred join): the
same rows in the same order as plain OFFSET pages, in a fixed number of queries at any depth."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster, Node
from findings.models import Finding

pytestmark = pytest.mark.django_db


@pytest.fixture
def nodes(db) -> list[Node]:
    clusters = [Cluster.objects.create(name=n, kind="slurm") for n in ("zeta", "alpha", "mid")]
    made = [
        Node.objects.create(
            cluster=clusters[i % 3],
            name=f"n{i:02d}",
            kind="slurm",
            state="idle" if i % 2 else "down",
        )
        for i in range(25)
    ]
    Finding.objects.create(
        type="node_unavailable", severity="warning", node=made[4], subject="node:x", message="m"
    )
    return made


def _pages(client, query: str) -> tuple[list[str], list[int]]:
    names, counts = [], []
    url = f"/api/v1/nodes/?page_size=10{query}"
    while url:
        with CaptureQueriesContext(connection) as captured:
            body = client.get(url).json()
        counts.append(len(captured.captured_queries))
        names += [f"{row['cluster']}/{row['name']}" for row in body["results"]]
        url = body["next"]
    return names, counts


def test_pages_keep_the_documented_order_and_every_row(client, user, nodes):
    client.force_login(user)
    names, counts = _pages(client, "")
    expected = sorted(f"{n.cluster.name}/{n.name}" for n in nodes)  # cluster name, then name
    assert names == expected
    assert len(set(counts)) == 1  # the last page costs what the first does


def test_pages_with_a_filter_and_an_ordering(client, user, nodes):
    client.force_login(user)
    names, _ = _pages(client, "&state=idle&ordering=-name")
    idle = [n for n in nodes if n.state == "idle"]
    assert names == [
        f"{n.cluster.name}/{n.name}" for n in sorted(idle, key=lambda n: n.name, reverse=True)
    ]


def test_a_page_still_carries_its_annotations(client, user, nodes):
    client.force_login(user)
    rows = client.get("/api/v1/nodes/?page_size=100").json()["results"]
    by_name = {row["name"]: row for row in rows}
    assert by_name["n04"]["open_findings"] == 1 and by_name["n05"]["open_findings"] == 0
