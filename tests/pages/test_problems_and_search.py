"""A problem shows wherever the thing is listed (issue 15 §1), and search finds (§4).

The fleet: `dgx-lost` has a GPU on its PCI bus that NVML never listed (the demo's
dgx-h100-10), the others are healthy; each is a Slurm node, one drained.
"""

from __future__ import annotations

import csv
import io

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from inventory.models import Gpu, MigDevice, Server
from tests.nodes import scontrol_node, scontrol_text
from tests.reports import apply_reports, lost_gpu_report, make_report

pytestmark = pytest.mark.django_db


def fleet(healthy: int = 3, *, offset: int = 0, lost: bool = True) -> dict[str, Server]:
    reports = [
        make_report(
            f"dgx-{offset + i:03d}", gpus=2, nics=1, mig_gpus={0: ["3g.40gb"]} if i == 2 else None
        )
        for i in range(healthy)
    ]
    if lost:
        reports.append(lost_gpu_report())
    servers = apply_reports(*reports)
    states = {"dgx-001": "IDLE+DRAIN"}
    snapshot_ingest(
        cluster_name=f"hpc{offset}",
        raw=scontrol_text(
            *(
                scontrol_node(
                    r["host"]["hostname"],
                    gres=f"gpu:h100:{len(r['gpus']) + (r is reports[-1] and lost)}",
                    state=states.get(r["host"]["hostname"], "IDLE"),
                )
                for r in reports
            )
        ),
    )
    reconcile_all()
    return servers


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def csv_rows(client, url: str) -> list[dict[str, str]]:
    response = client.get(url)
    assert response.status_code == 200
    body = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(body)))


def test_servers_list_shows_health_and_lost_gpus_on_the_page_and_in_the_csv(signed_in):
    fleet()
    page = signed_in.get("/servers/").content.decode()
    assert "Health" in page and 'data-state="critical"' in page
    rows = {r["Hostname"]: r for r in csv_rows(signed_in, "/servers/?format=csv")}
    assert rows["dgx-lost"]["Health"] == "critical" and rows["dgx-lost"]["Lost GPUs"] == "1"
    assert rows["dgx-lost"]["GPUs"] == "7"
    assert rows["dgx-000"]["Health"] == "ok" and rows["dgx-000"]["Lost GPUs"] == "0"
    assert rows["dgx-lost"]["Nodes"] == "hpc0/dgx-lost"
    assert rows["dgx-lost"]["Virtual"] == "false"
    assert rows["dgx-lost"]["Addresses"] and rows["dgx-lost"]["Serial"] == ""
    assert {"Rack", "U", "Serial", "Nodes", "Addresses"} <= set(rows["dgx-lost"])


def test_servers_health_filter_finds_the_server_with_a_critical_finding(signed_in):
    fleet()
    rows = csv_rows(signed_in, "/servers/?health=critical&format=csv")
    assert [r["Hostname"] for r in rows] == ["dgx-lost"]
    assert signed_in.get("/api/v1/servers/?health=critical").json()["count"] == 1
    assert signed_in.get("/servers/?health=nonsense").status_code == 200  # a field error


def test_gpu_list_lost_filter_returns_the_lost_gpu_with_its_address(signed_in):
    fleet()
    rows = csv_rows(signed_in, "/gpus/?status=lost&format=csv")
    assert [(r["Server"], r["Index"], r["PCI bus"], r["Status"]) for r in rows] == [
        ("dgx-lost", "5", "0000:68:00.0", "lost")
    ]
    assert "0000:68:00.0" in signed_in.get("/gpus/?status=lost").content.decode()


def test_node_rows_carry_their_servers_open_findings(signed_in):
    fleet()
    rows = {r["Node"]: r for r in csv_rows(signed_in, "/nodes/?format=csv")}
    assert int(rows["dgx-lost"]["Open findings"]) >= 1
    assert rows["dgx-lost"]["Worst finding"] == "critical"
    assert rows["dgx-000"]["Worst finding"] == ""


def test_node_state_filter_finds_drained_nodes(signed_in):
    fleet()
    rows = csv_rows(signed_in, "/nodes/?state=drain&format=csv")
    assert [r["Node"] for r in rows] == ["dgx-001"]
    page = signed_in.get("/nodes/").content.decode()
    assert '<option value="drain">drain</option>' in page  # a dropdown of known states


def test_overview_says_how_many_online_servers_have_a_critical_finding(signed_in):
    fleet()
    page = signed_in.get("/").content.decode()
    assert 'id="online-critical"' in page and "with a critical finding" in page


def test_search_by_serial_ip_uuid_pci_and_node_finds_the_server(signed_in):
    servers = fleet()
    Server.objects.filter(hostname="dgx-lost").update(serial="SN-4242")
    lost = servers["dgx-lost"]
    gpu = Gpu.objects.filter(server=lost, status="ok").first()
    mig = MigDevice.objects.first()
    for query in ("SN-4242", lost.addresses[0].split("/")[0], gpu.uuid, gpu.serial):
        page = signed_in.get("/search/", {"q": query}).content.decode()
        assert f'href="/servers/{lost.pk}/"' in page, query
    page = signed_in.get("/search/", {"q": gpu.pci_bus_id}).content.decode()
    assert 'id="search-gpus"' in page and gpu.pci_bus_id in page
    page = signed_in.get("/search/", {"q": mig.uuid}).content.decode()
    assert 'id="search-mig-devices"' in page and f"/servers/{mig.gpu.server_id}/" in page
    page = signed_in.get("/search/", {"q": "dgx-001"}).content.decode()
    assert 'id="search-nodes"' in page


def test_search_lists_each_server_once_and_bounds_each_kind(signed_in):
    fleet(12)
    page = signed_in.get("/search/", {"q": "dgx"}).content.decode()
    assert 'Servers <span class="muted">(13)</span>' in page
    assert "+3 more" in page and "/servers/?search=dgx" in page
    listed = signed_in.get("/servers/?search=dgx&format=csv")
    hosts = [r["Hostname"] for r in csv.DictReader(io.StringIO(b"".join(listed).decode()))]
    assert len(hosts) == len(set(hosts)) == 13
    api = signed_in.get("/api/v1/servers/?search=dgx&page_size=100").json()
    assert api["count"] == 13 and len({s["id"] for s in api["results"]}) == 13


def test_search_with_no_result_says_so_and_escapes_the_query(signed_in):
    fleet(1, lost=False)
    page = signed_in.get("/search/", {"q": "<b>nothing</b>"}).content.decode()
    assert "Nothing matches" in page and "<b>nothing</b>" not in page


def test_the_top_bar_has_the_search_box(signed_in):
    page = signed_in.get("/servers/").content.decode()
    assert 'id="global-search"' in page and 'action="/search/"' in page


@pytest.mark.parametrize("path", ["/search/?q=dgx", "/servers/?health=ok", "/nodes/?state=idle"])
def test_query_count_is_the_same_for_5_and_50_servers(signed_in, path):
    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert signed_in.get(path).status_code == 200
        return len(ctx.captured_queries)

    fleet(4)
    small = count()
    fleet(45, offset=100, lost=False)
    assert count() == small
