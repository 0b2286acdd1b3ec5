"""Every GPU row on every page links that GPU's page (`/gpus/<id>/`, its history): the server
page, the GPU list, the node page, the health page, a placement answer and a failure domain."""

from __future__ import annotations

import re

import pytest

from clusters.models import Node
from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from findings.models import Finding
from inventory.models import Gpu
from tests.nodes import k8s_node, k8s_node_list
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(client, user):
    report = make_report("dgx-01", gpus=4)
    servers = apply_reports(report)
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(k8s_node("dgx-01", system_uuid=report["host"]["system_uuid"], gpus=4)),
    )
    reconcile_all()
    client.force_login(user)
    return servers["dgx-01"]


def linked(page: str) -> set[int]:
    return {int(pk) for pk in re.findall(r'href="/gpus/(\d+)/"', page)}


def get(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode()


def test_every_gpu_row_links_its_gpu_page(client, fleet):
    gpus = set(Gpu.objects.filter(server=fleet).values_list("pk", flat=True))
    assert len(gpus) == 4
    node = Node.objects.get()
    assert linked(get(client, f"/servers/{fleet.pk}/")) >= gpus
    assert linked(get(client, "/gpus/")) >= gpus
    node_page = get(client, f"/nodes/{node.pk}/")
    assert linked(node_page) >= gpus
    assert '<code class="command-text">kubectl cordon dgx-01</code>' in node_page
    assert '<code class="command-text">kubectl uncordon dgx-01</code>' in node_page
    placement = get(client, "/placement/?tab=placement&gpus=4")
    answer = placement[placement.index('id="placement-nodes"') :]
    assert linked(answer[: answer.index("</table>")]) == gpus
    failure = get(client, f"/placement/?tab=failure&server={fleet.pk}")
    assert linked(failure[failure.index('id="failure-gpus"') :]) == gpus


def test_a_gpu_needing_action_links_its_page_from_the_health_page(client, fleet):
    gpu = Gpu.objects.get(server=fleet, index=1)
    Finding.objects.create(
        type="gpu_fatal_xid",
        severity="critical",
        subject=f"gpu:{gpu.uuid}",
        message="Xid 79",
        server=fleet,
        gpu=gpu,
    )
    page = get(client, "/health/")
    table = page[page.index('id="gpus-needing-action"') :]
    assert linked(table[: table.index("</table>")]) == {gpu.pk}
