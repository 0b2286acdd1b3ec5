"""NIC-to-NIC pairs of `nvidia-smi topo -m` are stored with their class and shown where the
server's links are (NIC-to-NIC affinity says whether two NICs share a PCIe switch)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from django.db import IntegrityError, transaction

from agent.sources.saved import build_saved_report
from agent.sources.topo_matrix import parse_topo_matrix
from inventory.models import AgentToken, Link, Nic
from inventory.services import report_apply, report_receive
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures/samples/topo-8xh20-nv18-ibp-nics.txt"
# NIC0..NIC4 of the sample's legend, and the NIC block of its matrix.
NICS = ["ibp14s0", "ibp71s0", "ibp134s0", "ibp195s0", "rocep32s0f0"]
NIC_BLOCK = [
    ["X", "NODE", "SYS", "SYS", "NODE"],
    ["NODE", "X", "SYS", "SYS", "NODE"],
    ["SYS", "SYS", "X", "NODE", "SYS"],
    ["SYS", "SYS", "NODE", "X", "SYS"],
    ["NODE", "NODE", "SYS", "SYS", "X"],
]


def h20_report() -> dict:
    topology = parse_topo_matrix(SAMPLE.read_text())
    return build_saved_report(
        topology=topology,
        hostname="h20-01",
        system_uuid="4c4c4544-0048-3910-8052-b4c04f4e3733",
        collected_at="2026-11-30T08:00:00Z",
    )


def nic_pairs(server) -> dict[frozenset[str], str]:
    return {
        frozenset((a, b)): cls
        for a, b, cls in Link.objects.filter(server=server, gpu_a__isnull=True).values_list(
            "nic_a__name", "nic_b__name", "link_class"
        )
    }


def expected_pairs() -> dict[frozenset[str], str]:
    return {
        frozenset((NICS[i], NICS[j])): NIC_BLOCK[i][j]
        for i in range(len(NICS))
        for j in range(i + 1, len(NICS))
    }


def test_nic_pairs_of_a_real_topo_matrix_are_stored_with_their_class():
    report = h20_report()
    assert sum(1 for link in report["links"] if link["a"].startswith("nic:")) == 10
    server = apply_reports(report)["h20-01"]
    assert nic_pairs(server) == expected_pairs()
    assert Link.objects.filter(server=server, gpu_b__isnull=False).count() == 28
    assert Link.objects.filter(server=server, nic__isnull=False).count() == 8 * 5
    # Each NIC pair once, lower name first, and no GPU on it.
    for row in Link.objects.filter(server=server, gpu_a__isnull=True).select_related(
        "nic_a", "nic_b"
    ):
        assert row.nic_a.name < row.nic_b.name and row.nvlink_count is None
        assert row.gpu_b_id is None and row.nic_id is None


def test_a_nic_pair_listed_twice_or_reversed_is_stored_once():
    report = make_report("dgx-01", gpus=1, nics=2)
    report["links"] += [
        {"a": "nic:mlx5_1", "b": "nic:mlx5_0", "link_class": "PIX"},
        {"a": "nic:mlx5_0", "b": "nic:mlx5_1", "link_class": "PIX"},
    ]
    server = apply_reports(report)["dgx-01"]
    assert nic_pairs(server) == {frozenset(("mlx5_0", "mlx5_1")): "PIX"}


def test_a_full_report_without_nic_pairs_drops_them():
    report = make_report("dgx-01", gpus=1, nics=2)
    with_pair = copy.deepcopy(report)
    with_pair["links"].append({"a": "nic:mlx5_0", "b": "nic:mlx5_1", "link_class": "PIX"})
    server = apply_reports(with_pair)["dgx-01"]
    assert len(nic_pairs(server)) == 1
    token = AgentToken.objects.get(server=server)
    result = report_receive(token=token, body=json.dumps(report).encode())
    report_apply(report_id=result.report_id)
    assert nic_pairs(server) == {}
    assert Link.objects.filter(server=server).count() == 2  # its GPU-NIC pairs


def test_a_link_has_exactly_two_ends_in_the_database():
    server = apply_reports(make_report("dgx-01", gpus=2, nics=2))["dgx-01"]
    gpu = server.gpus.first()
    nic_a, nic_b = Nic.objects.filter(server=server)
    bad = [
        {"nic_a": nic_a},  # one NIC
        {"gpu_a": gpu, "nic_a": nic_a, "nic_b": nic_b},  # a GPU on a NIC pair
        {"nic": nic_a, "nic_a": nic_a, "nic_b": nic_b},
        {},
    ]
    for ends in bad:
        with pytest.raises(IntegrityError), transaction.atomic():
            Link.objects.create(server=server, link_class="PIX", **ends)


def test_the_topology_api_and_the_server_api_show_nic_pairs(api):
    server = apply_reports(h20_report())["h20-01"]
    body = api.get(f"/api/v1/topology/servers/{server.pk}/").json()
    keys = [d["key"] for d in body["devices"]]
    assert keys[8:] == sorted(NICS)
    assert {"a": "ibp14s0", "b": "ibp71s0", "link_class": "NODE"} in body["links"]
    assert {"a": "ibp134s0", "b": "ibp195s0", "link_class": "NODE"} in body["links"]
    assert len(body["links"]) == 28 + 40 + 10
    position = {k: i for i, k in enumerate(keys)}
    for i, a in enumerate(NICS):
        for j, b in enumerate(NICS):
            assert body["matrix"][position[a]][position[b]] == NIC_BLOCK[i][j]

    detail = api.get(f"/api/v1/servers/{server.pk}/").json()
    pairs = {
        (link["a"], link["b"]): link["link_class"]
        for link in detail["links"]
        if link["gpu_a"] is None
    }
    assert pairs[("ibp14s0", "rocep32s0f0")] == "NODE"
    assert pairs[("ibp195s0", "rocep32s0f0")] == "SYS"
    assert len(pairs) == 10
    assert all(link["nic_a"] and link["nic_b"] for link in detail["links"] if not link["gpu_a"])


def test_the_server_page_matrix_shows_the_nic_block(client, user):
    server = apply_reports(h20_report())["h20-01"]
    client.force_login(user)
    page = client.get(f"/servers/{server.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    table = html[html.index('id="interconnect-matrix"') :]
    row = table[table.index("<th>ibp14s0</th>", table.index("<tbody>")) :]
    row = row[: row.index("</tr>")]
    cells = [c.split(">", 1)[1].split("<", 1)[0] for c in row.split("<td")[1:]]
    # GPU0..7, then ibp134s0, ibp14s0, ibp195s0, ibp71s0, rocep32s0f0, then NUMA.
    assert cells[8:13] == ["SYS", "X", "SYS", "NODE", "NODE"]
