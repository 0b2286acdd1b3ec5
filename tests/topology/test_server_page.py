"""The server page puts the problem first and gives one answer for each fact it shows twice:
the health badge in its header, the open findings before the hardware, a lost GPU apart from
the GPU now at its index (with the serial NVML last gave it), the switch port from the fabric's
cable, every GPU row a link to its GPU page, and the scheduler commands to copy."""

from __future__ import annotations

import html
import re
import shlex

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric.models import Fabric
from fabric.services import fabric_rebind, fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from findings.models import Finding
from inventory.choices import GpuStatus
from inventory.models import Gpu, Nic, Server
from tests.reports import apply_reports, make_report

from .server_fleet import server_with_a_lost_gpu

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def page_of(client, server: Server) -> str:
    response = client.get(f"/servers/{server.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def gpu_rows(page: str) -> list[str]:
    table = page[page.index('id="gpu-table"') :]
    table = table[: table.index("</table>")]
    return re.findall(r"<tr\b[^>]*>.*?</tr>", table[table.index("<tbody>") :], flags=re.S)


def test_the_header_carries_the_health_badge_and_the_findings_come_before_the_hardware(
    signed_in,
):
    server = server_with_a_lost_gpu()
    page = page_of(signed_in, server)
    header = page[page.index("<h1>") : page.index("</h1>")]
    assert 'id="server-health-badge"><span class="badge critical" data-state="critical"' in header
    line = page[page.index('id="server-health"') :]
    line = line[: line.index("</p>")]
    assert "3 open findings" in line and "1 GPU lost" in line
    order = [
        page.index(marker)
        for marker in (
            "</h1>",
            'id="server-findings"',
            "<h2>Hardware</h2>",
            'id="gpu-table"',
            'id="nic-table"',
            'id="disk-table"',
            "<h2>Fabric</h2>",
        )
    ]
    assert order == sorted(order)
    findings = page[page.index('id="server-findings"') : page.index("<h2>Hardware</h2>")]
    severities = re.findall(r'<tr class="sev-(\w+)"', findings)
    assert severities == ["critical", "critical", "warning"]


def test_a_healthy_server_says_so_in_its_header(signed_in):
    servers = apply_reports(make_report("dgx-01"))
    Finding.objects.all().delete()
    page = page_of(signed_in, servers["dgx-01"])
    header = page[page.index("<h1>") : page.index("</h1>")]
    assert 'data-state="ok">healthy</span>' in header and "No open findings" in page


def test_the_gpus_needing_action_are_counted_in_the_header(signed_in):
    server = server_with_a_lost_gpu()
    gpu = Gpu.objects.get(server=server, index=2)
    Finding.objects.create(
        type="gpu_fatal_xid",
        severity="critical",
        subject=f"gpu:{gpu.uuid}",
        message="Xid 79 on GPU 2",
        server=server,
        gpu=gpu,
    )
    page = page_of(signed_in, server)
    assert "1 GPU needing action" in page
    assert f'href="/gpus/{gpu.pk}/" class="gpu-link"' in page


def test_a_lost_gpu_and_the_gpu_now_at_its_index_do_not_both_read_5(signed_in):
    server = server_with_a_lost_gpu()
    lost = Gpu.objects.get(server=server, status=GpuStatus.LOST)
    live = Gpu.objects.get(server=server, index=5, status=GpuStatus.OK)
    assert lost.index == live.index == 5 and lost.serial  # what the page must tell apart
    rows = gpu_rows(page_of(signed_in, server))
    assert len(rows) == 8
    labels = [re.search(r'href="/gpus/\d+/"[^>]*>([^<]+)</a>', r).group(1) for r in rows]
    assert labels == ["0", "1", "2", "3", "4", "5", "6", "5 (lost)"]
    last = rows[-1]
    assert 'class="lost"' in last and f'href="/gpus/{lost.pk}/"' in last
    assert lost.serial in last and "last seen" in last and lost.pci_bus_id in last
    assert f'href="/gpus/{live.pk}/"' in rows[5] and live.serial in rows[5]


def test_a_gpu_nvml_never_identified_says_so_instead_of_a_last_seen_time(signed_in):
    from tests.reports import lost_gpu_report

    servers = apply_reports(lost_gpu_report("dgx-lost"))
    rows = gpu_rows(page_of(signed_in, servers["dgx-lost"]))
    (lost,) = [r for r in rows if "(lost)" in r]
    assert "NVML never identified it" in lost and "unknown" in lost


def test_the_nic_table_takes_the_switch_port_from_the_fabric_when_the_nic_has_none(signed_in):
    built = synthetic_fabric(servers=2, rails=2, servers_per_leaf=4)
    fabric_snapshot_ingest(fabric_name="ib", raw=built.text)
    servers = apply_reports(*(make_report(host, gpus=4, nics=2) for host in built.servers))
    fabric_rebind(fabric=Fabric.objects.get(name="ib"))
    server = servers[built.servers[0]]
    Nic.objects.filter(server=server, name="mlx5_1").update(switch="tor-7", switch_port="swp3")
    page = page_of(signed_in, server)
    nics = page[page.index('id="nic-table"') :]
    nics = nics[: nics.index("</table>")]
    rows = dict(re.findall(r"<tr[^>]*><td>(mlx5_\d)</td>(.*?)</tr>", nics, flags=re.S))
    assert "—</td>" not in rows["mlx5_0"].rsplit("<td>", 1)[1]
    fabric = page[page.index("<h2>Fabric</h2>") :]
    switch, port = re.search(
        r"<td>mlx5_0</td><td><a href=\"/fabric/switches/\d+/\">([^<]+)</a></td>"
        r"<td class=\"num\">([^<]+)</td>",
        fabric,
    ).groups()
    assert f">{switch}</a> {port} " in rows["mlx5_0"] and "(fabric)" in rows["mlx5_0"]
    assert "tor-7 swp3" in rows["mlx5_1"] and "(fabric)" not in rows["mlx5_1"]


def test_the_commands_box_drains_with_the_worst_findings_reason_quoted_and_escaped(signed_in):
    server = server_with_a_lost_gpu()
    evil = "GPU 5 it's gone; $(reboot) <script>alert(1)</script>"
    Finding.objects.create(
        type="gpu_fatal_xid", severity="critical", subject="x", message=evil, server=server
    )
    Finding.objects.filter(server=server).exclude(message=evil).update(severity="warning")
    page = page_of(signed_in, server)
    assert "<script>alert(1)" not in page
    box = page[page.index('id="commands"') : page.index('id="gpu-table"')]
    codes = [html.unescape(c) for c in re.findall(r'<code class="command-text">(.*?)</code>', box)]
    drain, resume = codes
    assert shlex.split(drain) == [
        "scontrol",
        "update",
        "nodename=dgx-h100-10",
        "state=drain",
        f"reason=atlas: {evil}",
    ]
    assert resume == "scontrol update nodename=dgx-h100-10 state=resume"
    assert box.count('<button type="button" class="copy') == 2
    assert "js/copy.js" in page


def test_a_server_in_no_scheduler_has_no_commands_box(signed_in):
    servers = apply_reports(make_report("dgx-01"))
    assert 'id="commands"' not in page_of(signed_in, servers["dgx-01"])


def test_the_server_page_costs_the_same_queries_for_5_and_100_servers(signed_in):
    server = server_with_a_lost_gpu(healthy=4)

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            page_of(signed_in, server)
        return len(ctx.captured_queries)

    small = count()
    assert Server.objects.count() == 5
    apply_reports(*(make_report(f"big-{i:03d}", gpus=1, nics=1) for i in range(95)))
    assert Server.objects.count() == 100
    assert count() == small


def test_the_node_page_offers_its_commands_and_its_servers_gpus(signed_in):
    from clusters.models import Node

    server = server_with_a_lost_gpu()
    node = Node.objects.get(server=server)
    lost = Gpu.objects.get(server=server, status=GpuStatus.LOST)
    response = signed_in.get(f"/nodes/{node.pk}/")
    page = response.content.decode()
    box = page[page.index('id="commands"') :]
    codes = [html.unescape(c) for c in re.findall(r'<code class="command-text">(.*?)</code>', box)]
    # the worst open finding of the node or its server gives the reason
    assert shlex.split(codes[0])[-1] == "reason=atlas: " + (
        Finding.objects.get(server=server, type="gpu_not_in_nvml").message
    )
    assert codes[1] == f"scontrol update nodename={node.name} state=resume"
    gpus = page[page.index('id="node-gpu-table"') :]
    assert f'href="/gpus/{lost.pk}/"' in gpus and "5 (lost)" in gpus and lost.serial in gpus
    assert "js/copy.js" in page
