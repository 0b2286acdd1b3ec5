"""report_apply with the agent's fabric and storage facts: InfiniBand identity and LLDP
neighbours on NICs, NVLink fabric on GPUs, disks; idempotent, and old reports still apply."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inventory.models import Disk, Gpu, Nic, Server
from inventory.services import agent_token_create, report_apply, report_receive
from tests.reports import make_report

pytestmark = pytest.mark.django_db

NEIGHBOR = {
    "system_name": "roce-leaf-01",
    "chassis_id": "1c:34:da:5e:60:00",
    "port_id": "swp17s0",
    "port_description": "to gpu-01",
    "management_address": "10.10.0.11",
}


def nvme(name: str, serial: str, numa: int = 0) -> dict:
    return {
        "name": name,
        "model": "SAMSUNG MZWLR3T8HCLS-00A07",
        "serial": serial,
        "size_bytes": 3840755982336,
        "rotational": False,
        "transport": "nvme",
        "pci_bus_id": "0000:61:00.0",
        "pcie_link_speed": "16.0 GT/s",
        "pcie_link_width": 4,
        "numa_node": numa,
    }


def fabric_report(hostname: str = "gb-01", *, disks=None, guid: str = "b83fd2030093c7a2"):
    report = make_report(hostname, gpus=4, nics=2)
    ib = report["nics"][0]
    ib.update(
        kind="infiniband",
        node_guid=guid,
        port_number=1,
        port_guid=guid,
        port_guids=[guid],
        lid=0x1A2,
        rate="400 Gb/sec (4X NDR)",
        phys_state="linkup",
        link_layer="infiniband",
    )
    report["nics"][1]["lldp_neighbors"] = [NEIGHBOR]
    for gpu in report["gpus"]:
        gpu.update(
            fabric_cluster_uuid="88e955db-1769-549b-8bd0-dea5ed7df1b4",
            fabric_clique_id=4294967295,
            fabric_state="completed",
            fabric_status="Success",
        )
    report["disks"] = (
        [nvme("nvme0n1", "S6A"), nvme("nvme1n1", "S6B", 1)] if disks is None else disks
    )
    return report


def apply(report, token):
    token.refresh_from_db()
    result = report_receive(token=token, body=json.dumps(report).encode())
    return report_apply(report_id=result.report_id) if result.status != "unchanged" else None


def test_nics_gpus_and_disks_keep_the_fabric_and_storage_facts():
    token = agent_token_create(name="t")[0]
    apply(fabric_report(), token)
    server = Server.objects.get()
    ib = Nic.objects.get(server=server, node_guid="b83fd2030093c7a2")
    assert (ib.port_guid, ib.port_guids, ib.lid, ib.port_number) == (
        "b83fd2030093c7a2",
        ["b83fd2030093c7a2"],
        418,
        1,
    )
    assert (ib.rate, ib.phys_state, ib.link_layer) == (
        "400 Gb/sec (4X NDR)",
        "linkup",
        "infiniband",
    )
    other = Nic.objects.exclude(pk=ib.pk).get(server=server)
    assert other.lldp_neighbors == [NEIGHBOR] and other.node_guid == ""
    assert set(
        Gpu.objects.values_list("fabric_cluster_uuid", "fabric_clique_id", "fabric_state")
    ) == {("88e955db-1769-549b-8bd0-dea5ed7df1b4", 4294967295, "completed")}
    assert list(Disk.objects.values_list("name", "serial", "numa_node", "pcie_link_width")) == [
        ("nvme0n1", "S6A", 0, 4),
        ("nvme1n1", "S6B", 1, 4),
    ]


def test_a_gone_disk_is_deleted_and_a_changed_one_updated():
    token = agent_token_create(name="t")[0]
    apply(fabric_report(), token)
    apply(fabric_report(disks=[nvme("nvme0n1", "S6C")]), token)
    assert list(Disk.objects.values_list("name", "serial")) == [("nvme0n1", "S6C")]
    apply(fabric_report(disks=[]), token)
    assert not Disk.objects.exists()


def test_a_report_without_the_new_fields_still_applies_and_clears_them():
    token = agent_token_create(name="t")[0]
    apply(fabric_report(), token)
    apply(make_report("gb-01", gpus=4, nics=2), token)
    assert not Disk.objects.exists()
    assert set(Nic.objects.values_list("node_guid", "lid")) == {("", None)}
    assert set(Gpu.objects.values_list("fabric_cluster_uuid", "fabric_clique_id")) == {("", None)}


def test_disks_and_fabric_facts_cost_the_same_queries_for_2_and_24_disks():
    def cost(host, count):
        token = agent_token_create(name=host)[0]
        disks = [nvme(f"nvme{i}n1", f"S{host}{i}") for i in range(count)]
        apply(fabric_report(host, disks=disks), token)
        changed = fabric_report(host, disks=[{**d, "serial": d["serial"] + "x"} for d in disks])
        token.refresh_from_db()
        result = report_receive(token=token, body=json.dumps(changed).encode())
        with CaptureQueriesContext(connection) as ctx:
            report_apply(report_id=result.report_id)
        return len(ctx.captured_queries)

    assert cost("small", 2) == cost("big", 24)


# -- API ------------------------------------------------------------------------------------


def test_the_api_shows_disks_nic_ib_fields_and_gpu_fabric(api):
    apply(fabric_report(), agent_token_create(name="t")[0])
    apply(fabric_report("gb-02", guid="b83fd2030093c7a3"), agent_token_create(name="u")[0])
    server = Server.objects.get(hostname="gb-01")
    detail = api.get(f"/api/v1/servers/{server.pk}/").json()
    assert [d["name"] for d in detail["disks"]] == ["nvme0n1", "nvme1n1"]
    assert detail["disks"][1]["numa_node"] == 1
    ib = next(n for n in detail["nics"] if n["node_guid"])
    assert (ib["lid"], ib["rate"], ib["port_guids"]) == (
        418,
        "400 Gb/sec (4X NDR)",
        [ib["node_guid"]],
    )
    assert any(n["lldp_neighbors"] == [NEIGHBOR] for n in detail["nics"])
    gpu = api.get(f"/api/v1/gpus/?server={server.pk}").json()["results"][0]
    assert (gpu["fabric_clique_id"], gpu["fabric_state"]) == (4294967295, "completed")
    domain = api.get("/api/v1/gpus/?fabric_cluster_uuid=88E955DB-1769-549B-8BD0-DEA5ED7DF1B4")
    assert domain.json()["count"] == 8  # both servers' GPUs: one NVLink fabric
    assert api.get("/api/v1/gpus/?fabric_cluster_uuid=other").json()["count"] == 0
    disks = api.get(f"/api/v1/disks/?server={server.pk}").json()
    assert disks["count"] == 2 and {d["server_hostname"] for d in disks["results"]} == {"gb-01"}
    assert api.get("/api/v1/disks/").json()["count"] == 4


def test_the_disk_list_costs_the_same_queries_for_one_server_and_many(api):
    apply(fabric_report(), agent_token_create(name="t")[0])

    def cost():
        with CaptureQueriesContext(connection) as ctx:
            assert api.get("/api/v1/disks/").status_code == 200
        return len(ctx.captured_queries)

    one = cost()
    for n in range(2, 6):
        apply(
            fabric_report(f"gb-{n:02d}", guid=f"b83fd2030093c7b{n}"),
            agent_token_create(name=f"t{n}")[0],
        )
    assert cost() == one


@pytest.mark.parametrize("query", ["server=abc", "server=99999999999999999999999"])
def test_a_bad_server_filter_is_a_field_level_400(api, query):
    answer = api.get(f"/api/v1/disks/?{query}")
    assert answer.status_code == 400 and "server" in json.dumps(answer.json())


def test_anonymous_callers_get_no_disks(client):
    assert client.get("/api/v1/disks/").status_code in (401, 403)
