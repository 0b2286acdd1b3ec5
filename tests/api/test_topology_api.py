"""GET /api/v1/topology/servers/{id}/: the interconnect matrix and links of one server."""

import pytest

from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


def test_matrix_and_links_of_a_server(api):
    servers = apply_reports(make_report("dgx-01", gpus=4, nics=1))
    body = api.get(f"/api/v1/topology/servers/{servers['dgx-01'].pk}/").json()
    keys = [d["key"] for d in body["devices"]]
    assert keys == ["GPU0", "GPU1", "GPU2", "GPU3", "mlx5_0"]
    assert body["matrix"][0] == ["X", "NV18", "NV18", "NV18", "PIX"]
    assert body["matrix"][4][1] == "SYS"
    assert {"a": "GPU0", "b": "GPU1", "link_class": "NV18"} in body["links"]
    assert [item["link_class"] for item in body["legend"]] == ["NV18", "PIX", "SYS"]


def test_unknown_server_is_404_and_anonymous_is_401(api, client):
    assert api.get("/api/v1/topology/servers/999/").status_code == 404
    assert client.get("/api/v1/topology/servers/1/").status_code == 401


def test_the_endpoint_is_in_the_openapi_schema(api):
    paths = api.get("/api/schema/?format=json").json()["paths"]
    assert "/api/v1/topology/servers/{id}/" in paths
