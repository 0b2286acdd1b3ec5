"""The nodes list names each node's driver (issue 23, item 6): the bound server's as its agent
reports it, else the node's own label; sortable, and in the CSV."""

from __future__ import annotations

import pytest

from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from tests.nodes import k8s_node, k8s_node_list
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


@pytest.fixture
def nodes():
    apply_reports(make_report("dgx-01", gpus=2), make_report("dgx-02", gpus=2, driver="535.104.05"))
    label = {"nvidia.com/cuda.driver-version.full": "560.35.03"}
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(
            k8s_node("dgx-01", gpus=2),
            k8s_node("dgx-02", gpus=2),
            k8s_node("vm-<7>", gpus=2, labels=label),
        ),
    )
    reconcile_all()


def _csv(client, query: str = "") -> list[str]:
    response = client.get(f"/nodes/?format=csv{query}")
    return b"".join(response.streaming_content).decode().splitlines()


def test_the_driver_column_shows_the_servers_else_the_labels(client, user, nodes):
    client.force_login(user)
    body = client.get("/nodes/").content.decode()
    assert '<th><a href="?sort=driver_version">Driver</a></th>' in body
    assert "550.54.15" in body and "535.104.05" in body and "560.35.03" in body
    assert 'title="the node&#x27;s label"' in body
    lines = _csv(client, "&sort=driver_version")
    header = lines[0].split(",")
    column = header.index("Driver")
    drivers = [line.split(",")[column] for line in lines[1:]]
    assert drivers == ["535.104.05", "550.54.15", "560.35.03"]
    lines = _csv(client, "&sort=-driver_version")
    assert [line.split(",")[column] for line in lines[1:]] == [
        "560.35.03",
        "550.54.15",
        "535.104.05",
    ]
