"""Read API of the inventory: fields, filters, pagination, auth, constant query counts."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inventory.models import Server
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


load = apply_reports


def test_anonymous_read_is_off(client):
    for path in ("/api/v1/servers/", "/api/v1/gpus/", "/api/v1/mig-devices/"):
        assert client.get(path).status_code in (401, 403)


def test_server_list_has_the_contract_fields(api):
    load(make_report("dgx-01", mig_gpus={0: ["3g.40gb", "3g.40gb"]}))
    row = api.get("/api/v1/servers/").json()["results"][0]
    for field in (
        "id",
        "hostname",
        "system_uuid",
        "state",
        "gpu_count",
        "mig_device_count",
        "last_seen",
    ):
        assert field in row
    assert row["mig_device_count"] == 2 and row["mig_enabled"] is True


def test_server_detail_has_gpus_mig_nics_links_and_changes(api):
    load(make_report("dgx-01", mig_gpus={0: ["7g.80gb"]}))
    server_id = Server.objects.get().pk
    detail = api.get(f"/api/v1/servers/{server_id}/").json()
    assert len(detail["gpus"]) == 8
    assert detail["gpus"][0]["mig_devices"][0]["profile"] == "7g.80gb"
    assert len(detail["nics"]) == 2
    assert {"a": "GPU0", "b": "GPU1"}.items() <= detail["links"][0].items()
    assert detail["recent_changes"][0]["kind"] == "server_added"


def test_gpu_and_mig_lists_have_the_contract_fields_and_filter_by_server(api):
    load(make_report("dgx-01", mig_gpus={2: ["1g.10gb"] * 7}), make_report("dgx-02", gpus=4))
    server = Server.objects.get(hostname="dgx-02")
    gpus = api.get(f"/api/v1/gpus/?server={server.pk}").json()
    assert gpus["count"] == 4
    for field in (
        "id",
        "uuid",
        "server",
        "index",
        "name",
        "serial",
        "pci_bus_id",
        "memory_total_bytes",
        "mig_enabled",
    ):
        assert field in gpus["results"][0]
    migs = api.get("/api/v1/mig-devices/?profile=1g.10gb").json()
    assert migs["count"] == 7
    for field in (
        "id",
        "uuid",
        "gpu",
        "profile",
        "gpu_instance_id",
        "compute_instance_id",
        "memory_bytes",
    ):
        assert field in migs["results"][0]


def test_filters_search_model_state_mig(api):
    load(
        make_report("dgx-01"),
        make_report("a100-01", model="NVIDIA A100-SXM4-80GB", mig_gpus={0: ["1g.10gb"]}),
        make_report("login-01", gpus=0),
    )

    def names(query):
        rows = api.get(f"/api/v1/servers/?{query}").json()["results"]
        return sorted(r["hostname"] for r in rows)

    assert names("model=A100") == ["a100-01"]
    assert names("search=h100") == ["dgx-01"]
    assert names("search=1g.10gb") == ["a100-01"]
    assert names("mig=true") == ["a100-01"]
    assert names("state=online") == ["a100-01", "dgx-01", "login-01"]
    assert names("state=offline") == []
    assert names("search=online") == ["a100-01", "dgx-01", "login-01"]


def test_page_size_is_client_chosen_up_to_1000(api):
    load(*(make_report(f"n{i:02d}", gpus=1, nics=0) for i in range(5)))
    page = api.get("/api/v1/servers/?page_size=2").json()
    assert page["count"] == 5 and len(page["results"]) == 2 and page["next"]
    assert len(api.get("/api/v1/gpus/?page_size=5000").json()["results"]) == 5


def test_staff_sets_rack_and_physical_host_readers_cannot(api, staff, client):
    load(make_report("dgx-01"), make_report("vm-01", gpus=1))
    server, vm = Server.objects.get(hostname="dgx-01"), Server.objects.get(hostname="vm-01")
    assert (
        api.patch(f"/api/v1/servers/{server.pk}/", {"rack": "R12"}, format="json").status_code
        == 403
    )
    client.force_login(staff)
    response = client.patch(
        f"/api/v1/servers/{vm.pk}/",
        data=json.dumps({"rack": "R12", "rack_position": 20, "physical_host": server.pk}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    vm.refresh_from_db()
    assert vm.rack == "R12" and vm.physical_host == server and vm.physical_host_manual
    from inventory.services import revision_get

    before = revision_get(name="inventory")
    client.patch(
        f"/api/v1/servers/{server.pk}/",
        data=json.dumps({"rack": "R13"}),
        content_type="application/json",
    )
    assert revision_get(name="inventory") == before + 1  # figures and failure domains follow


@pytest.mark.parametrize("path", ["/api/v1/servers/", "/api/v1/gpus/", "/api/v1/mig-devices/"])
def test_list_query_count_is_the_same_for_1_and_50_servers(api, path):
    def queries():
        with CaptureQueriesContext(connection) as ctx:
            assert api.get(path + "?page_size=1000").status_code == 200
        return len(ctx.captured_queries)

    load(make_report("first", mig_gpus={0: ["1g.10gb"]}))
    one = queries()
    load(*(make_report(f"dgx-{i:02d}", mig_gpus={0: ["1g.10gb"]}) for i in range(49)))
    assert queries() == one


def test_openapi_schema_names_the_endpoints(api):
    response = api.get("/api/schema/?format=json")
    assert response.status_code == 200
    paths = json.loads(response.content)["paths"]
    for path in (
        "/api/v1/reports/",
        "/api/v1/servers/",
        "/api/v1/servers/{id}/",
        "/api/v1/gpus/",
        "/api/v1/mig-devices/",
    ):
        assert path in paths
