"""Dashboard pages: sign-in required, what they show, and a query count that does not grow."""

from __future__ import annotations

import csv
import io

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.reconcile import reconcile_all
from clusters.selectors import scheduler_summary
from clusters.services import snapshot_ingest
from inventory.models import Server
from tests.nodes import k8s_node, k8s_node_list, scontrol_node, scontrol_text
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db

PAGES = [
    "/",
    "/servers/",
    "/gpus/",
    "/nodes/",
    "/workloads/",
    "/findings/",
    "/topology/",
    "/placement/",
]


def fleet(count: int, offset: int = 0) -> None:
    reports = [
        make_report(f"dgx-{offset + i:03d}", gpus=4, nics=1, mig_gpus={0: ["1g.10gb"] * 7})
        for i in range(count)
    ]
    apply_reports(*reports)
    snapshot_ingest(
        cluster_name=f"k{offset}",
        raw=k8s_node_list(
            *(
                k8s_node(r["host"]["hostname"], system_uuid=r["host"]["system_uuid"], gpus=3)
                for r in reports
            )
        ),
    )
    snapshot_ingest(
        cluster_name=f"s{offset}",
        raw=scontrol_text(
            *(
                scontrol_node(r["host"]["hostname"], gres="gpu:h100:3,gpu:1g.10gb:7")
                for r in reports
            )
        ),
    )
    reconcile_all()


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


@pytest.mark.parametrize("path", [*PAGES, "/servers/1/"])
def test_pages_require_sign_in(client, path):
    response = client.get(path)
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_overview_shows_the_layers_in_one_line(signed_in):
    fleet(3)
    response = signed_in.get("/")
    assert response.status_code == 200
    fleet_summary = response.context["fleet"]
    assert (fleet_summary["servers"], fleet_summary["gpus"], fleet_summary["mig_devices"]) == (
        3,
        12,
        21,
    )
    assert response.context["nodes"]["total"] == 6
    text = response.content.decode()
    assert "servers</a>" in text and ">6</span> nodes" in text


def test_server_list_filters_sorts_and_exports(signed_in):
    fleet(3)
    apply_reports(make_report("l40s-01", gpus=4, model="NVIDIA L40S"))
    page = signed_in.get("/servers/?model=L40S").context["page"]
    assert [s.hostname for s in page] == ["l40s-01"]
    page = signed_in.get("/servers/?sort=-hostname").context["page"]
    assert next(iter(page)).hostname == "l40s-01"
    page = signed_in.get("/servers/?cluster=k0").context["page"]
    assert len(page) == 3
    response = signed_in.get("/servers/?format=csv&mig=true")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0][0] == "Hostname" and len(rows) == 4


def test_nodes_page_puts_counts_side_by_side(signed_in):
    fleet(2)
    rows = list(signed_in.get("/nodes/?kind=kubernetes").context["page"])
    assert {(n.agent_gpu_count, n.gpu_allocatable) for n in rows} == {(4, 3)}
    assert all(n.disagrees for n in rows)  # 4 GPUs, 1 in MIG mode: mixed strategy not labelled


def test_findings_page_lists_open_by_default(signed_in):
    fleet(1)
    # Each snapshot replaces the whole node set: confirmed, or it would be held.
    snapshot_ingest(
        cluster_name="k0", raw=k8s_node_list(k8s_node("ghost", gpus=8)), confirm_shrink=True
    )
    reconcile_all()
    response = signed_in.get("/findings/?type=node_without_server")
    assert [f.node.name for f in response.context["page"]] == ["ghost"]
    assert (
        list(signed_in.get("/findings/?open=false&type=node_without_server").context["page"]) == []
    )
    # ghost gone: its finding resolves
    snapshot_ingest(cluster_name="k0", raw=k8s_node_list(), confirm_shrink=True)
    reconcile_all()
    resolved = signed_in.get("/findings/?open=false&type=node_without_server").context["page"]
    assert [f.node.name for f in resolved] == ["ghost"]
    assert "ghost" not in signed_in.get("/findings/").content.decode()


def test_csv_export_neutralises_formulas(signed_in):
    report = make_report("=cmd|' /C calc'!A0", gpus=1)
    apply_reports(report)
    response = signed_in.get("/servers/?format=csv")
    body = b"".join(response.streaming_content).decode()
    assert "'=cmd" in body


def test_query_count_is_the_same_for_5_and_100_servers(signed_in):
    """Every page at once: the fleets are built once (building is most of the test's time),
    and a page whose count grows is named in the assertion's diff."""

    def counts() -> dict[str, int]:
        server = f"/servers/{Server.objects.order_by('id').first().pk}/"
        out = {}
        for path in [*PAGES, server]:
            with CaptureQueriesContext(connection) as ctx:
                assert signed_in.get(path).status_code == 200, path
            out["server" if path == server else path] = len(ctx.captured_queries)
        return out

    fleet(5)
    small = counts()
    fleet(95, offset=100)
    assert counts() == small


def test_the_overview_node_counts_cost_four_queries(django_assert_num_queries):
    fleet(3)
    with django_assert_num_queries(4):  # clusters with counts, live, unbound, findings
        summary = scheduler_summary()
        assert [c.name for c in summary["clusters"]] == ["k0", "s0"]
    assert (summary["total"], summary["unbound"]) == (6, 0)
