"""Placement, failure-domain and capacity API: fields, errors, auth, schema, query counts."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from inventory.models import Server
from placement.views import placement_page
from tests.placement.fleets import k8s_fleet, slurm_fleet
from tests.reports import make_report

pytestmark = pytest.mark.django_db

NODE_FIELDS = {"node", "cluster", "kind", "server", "gpus", "link_class", "free_gpus", "gpu_count"}


def test_slurm_request_answers_2_nodes_x_8(api):
    slurm_fleet([f"gpu{i:03d}" for i in range(10)])
    response = api.get("/api/v1/placement/", {"cluster": "hpc", "gpus": 16})
    assert response.status_code == 200
    body = response.json()
    assert body["fits"] is True and body["total_gpus"] == 16 and body["reason"] is None
    assert [n["gpu_count"] for n in body["nodes"]] == [8, 8]
    node = body["nodes"][0]
    assert set(node) >= NODE_FIELDS
    assert node["kind"] == "slurm" and node["link_class"] == "NV18"
    assert {"index", "uuid"} <= set(node["gpus"][0])
    assert {"alternatives", "blocked", "candidates", "clusters"} <= set(body)


def test_a_pod_that_does_not_fit_says_why_with_alternatives(api):
    k8s_fleet([make_report("dgx-01")])
    body = api.get("/api/v1/placement/?cluster=prod&gpus=9").json()
    assert body["fits"] is False and body["nodes"] == []
    assert "one node" in body["reason"]
    (alternative,) = body["alternatives"]
    assert alternative["params"] == {"cluster": "prod", "nodes": 1, "gpus_per_node": 8}
    assert body["blocked"][0]["reason"] == "too_small"


def test_booleans_memory_and_mig_parameters_are_read(api):
    k8s_fleet([make_report("dgx-01")])
    body = api.get(
        "/api/v1/placement/",
        {"gpus": 2, "nvlink_only": "true", "min_gpu_memory": "80GB", "model": "H100"},
    ).json()
    assert body["fits"] and body["request"]["nvlink_only"] is True
    assert body["request"]["min_gpu_memory"] == 80 * 2**30
    too_big = api.get("/api/v1/placement/", {"gpus": 1, "min_gpu_memory": "81GB"}).json()
    assert not too_big["fits"] and too_big["blocked"][0]["reason"] == "memory"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("nodes=2", "gpus"),
        ("gpus=0", "gpus"),
        ("gpus=10&gpus_per_node=4", "gpus"),
        ("gpus=1&mig_profile=big", "mig_profile"),
        ("gpus=1&min_gpu_memory=lots", "min_gpu_memory"),
        ("gpus=1&scheduler=pbs", "scheduler"),
    ],
)
def test_bad_placement_requests_answer_400_naming_the_field(api, query, field):
    response = api.get(f"/api/v1/placement/?{query}")
    assert response.status_code == 400
    assert field in response.json()


def test_a_pod_request_over_every_cluster_answers_kubernetes_only(api):
    k8s_fleet([make_report("dgx-01")])
    slurm_fleet(["gpu000", "gpu001"])
    body = api.get("/api/v1/placement/", {"gpus": 16, "scheduler": "kubernetes"}).json()
    assert body["fits"] is False and body["scheduler"] == "kubernetes"
    assert [c["cluster"] for c in body["clusters"]] == ["prod"]
    assert body["scope"] == "Kubernetes clusters only: hpc (Slurm) not considered"
    assert body["request"]["scheduler"] == "kubernetes"
    mismatch = api.get(
        "/api/v1/placement/", {"gpus": 1, "cluster": "hpc", "scheduler": "kubernetes"}
    )
    assert mismatch.status_code == 400 and "scheduler" in mismatch.json()
    assert api.get("/api/v1/placement/", {"gpus": 16}).json()["scope"] is None


def test_failure_domains_and_ranking(api):
    servers = slurm_fleet(["gpu000", "gpu001"])
    Server.objects.filter(hostname="gpu000").update(rack="r1")
    body = api.get(f"/api/v1/failure-domains/?server={servers['gpu000'].pk}").json()
    assert (body["servers"], body["nodes"], body["gpus"], body["mig_devices"]) == (1, 1, 8, 0)
    assert {"server_list", "node_list", "gpu_list", "mig_device_list", "clusters"} <= set(body)
    assert body["clusters"][0]["share_lost"] == 0.5
    assert api.get("/api/v1/failure-domains/?rack=r1").json()["gpus"] == 8
    assert api.get("/api/v1/failure-domains/").status_code == 400
    assert api.get("/api/v1/failure-domains/?rack=r1&switch=s").status_code == 400
    ranking = api.get("/api/v1/failure-domains/ranking/?by=server&limit=1").json()
    assert ranking["count"] == 2 and len(ranking["items"]) == 1
    assert ranking["items"][0]["gpus"] == 8
    assert api.get("/api/v1/failure-domains/ranking/?by=row").status_code == 400


def test_capacity_planner(api):
    body = api.get("/api/v1/placement/capacity/?gpus=80&per_server=8,4,1").json()
    assert [(x["servers"], x["gpus_per_server"]) for x in body["layouts"]] == [
        (10, 8),
        (20, 4),
        (80, 1),
    ]
    assert body["layouts"][0]["gpus_lost_per_server_failure"] == 8
    assert body["layouts"][0]["within_server_link"] == "NVLink"
    pcie = api.get("/api/v1/placement/capacity/?gpus=8&per_server=8&nvlink=false").json()
    assert pcie["layouts"][0]["within_server_link"] == "PCIe"
    assert api.get("/api/v1/placement/capacity/?gpus=8&per_server=a").status_code == 400
    assert api.get("/api/v1/placement/capacity/").status_code == 400


def test_anonymous_callers_are_refused(db):
    client = APIClient()
    for url in (
        "/api/v1/placement/?gpus=1",
        "/api/v1/failure-domains/?rack=r1",
        "/api/v1/failure-domains/ranking/",
        "/api/v1/placement/capacity/?gpus=8",
    ):
        assert client.get(url).status_code in (401, 403)


def test_fields_are_in_the_openapi_schema(api):
    schema = api.get("/api/schema/?format=json").json()
    paths = schema["paths"]
    for path in (
        "/api/v1/placement/",
        "/api/v1/placement/capacity/",
        "/api/v1/failure-domains/",
        "/api/v1/failure-domains/ranking/",
    ):
        assert path in paths
    parameters = {p["name"] for p in paths["/api/v1/placement/"]["get"]["parameters"]}
    assert {
        "cluster",
        "gpus",
        "nodes",
        "gpus_per_node",
        "model",
        "mig_profile",
        "nvlink_only",
        "min_gpu_memory",
        "partition",
        "scheduler",
        "mix_models",
    } <= parameters
    described = {
        p["name"]: p.get("description", "")
        for p in paths["/api/v1/placement/"]["get"]["parameters"]
    }
    assert "one GPU model" in described["mix_models"]
    assert "1g" in described["mig_profile"]
    components = schema["components"]["schemas"]
    result = components["PlacementResult"]["properties"]
    assert {"fits", "total_gpus", "nodes", "reason", "alternatives", "blocked"} <= set(result)
    assert {"scheduler", "scope", "mig_profile", "mig_elsewhere"} <= set(result)
    assert {"cluster", "kind", "free", "nodes", "text"} <= set(
        components["MigElsewhere"]["properties"]
    )
    assert set(components["PlacementNode"]["properties"]) >= NODE_FIELDS
    domain = components["FailureDomain"]["properties"]
    assert {"servers", "nodes", "gpus", "mig_devices", "server_list", "node_list"} <= set(domain)
    failure_parameters = {p["name"] for p in paths["/api/v1/failure-domains/"]["get"]["parameters"]}
    assert {"server", "rack", "switch"} <= failure_parameters


def test_placement_api_queries_do_not_grow_with_the_fleet(api):
    def count(n: int, prefix: str) -> int:
        slurm_fleet([f"{prefix}{i:02d}" for i in range(n)], cluster=prefix)
        with CaptureQueriesContext(connection) as queries:
            assert api.get(f"/api/v1/placement/?cluster={prefix}&gpus=16").json()["fits"]
        return len(queries)

    assert count(2, "few") == count(12, "many")


def test_an_answer_with_alternatives_costs_the_same_queries_at_any_size(api):
    """A pod that does not fit reads the other clusters and, for a multi-node alternative, the
    fabric: a fixed number of queries more, whatever the fleet."""
    for n, prefix in ((2, "few"), (12, "many")):
        k8s_fleet([make_report(f"{prefix}{i:02d}") for i in range(n)], cluster=prefix)

    def count(prefix: str) -> int:
        with CaptureQueriesContext(connection) as queries:
            body = api.get(f"/api/v1/placement/?cluster={prefix}&gpus=16").json()
        assert not body["fits"] and {a["node_count"] for a in body["alternatives"]} >= {2}
        return len(queries)

    assert count("few") == count("many")


def test_mix_models_is_asked_by_the_api_and_one_model_is_the_default(api):
    h100 = make_report("h100-01")
    a100 = make_report("a100-01", model="NVIDIA A100-SXM4-80GB")
    slurm_fleet(["h100-01", "a100-01"], reports=[h100, a100])
    body = api.get("/api/v1/placement/", {"cluster": "hpc", "gpus": 16}).json()
    assert body["fits"] is False and "fits only by mixing GPU models" in body["reason"]
    (mixing,) = [a for a in body["alternatives"] if a["params"].get("mix_models")]
    mixed = api.get("/api/v1/placement/", mixing["params"]).json()
    assert mixed["fits"] and len(mixed["models"]) == 2 and "slowest" in mixed["cost"]
    assert [n["node"] for n in mixed["nodes"]] == mixing["nodes"]
    assert mixed["clusters"][0]["mixes_models"] is True


def test_a_mig_request_by_slices_is_read_and_names_the_profile_placed(api):
    report = make_report("a100-01", model="NVIDIA A100-SXM4-80GB", mig_gpus={0: ["1g.20gb"] * 4})
    slurm_fleet(["a100-01"], reports=[report], gres="gpu:1g.20gb:4")
    body = api.get("/api/v1/placement/", {"gpus": 2, "mig_profile": "1g"}).json()
    assert body["fits"] and body["mig_profile"] == "1g.20gb"
    assert body["request"]["mig_profile"] == "1g"
    assert {g["mig_profile"] for g in body["nodes"][0]["gpus"]} == {"1g.20gb"}


def test_placement_page_renders_the_answer_escaped(client, user):
    k8s_fleet([make_report("dgx-01")])
    client.force_login(user)
    assert client.get(reverse("placement")).status_code == 200
    request = RequestFactory().get(
        "/placement/", {"tab": "placement", "gpus": 4, "model": "<script>x</script>"}
    )
    request.user = user
    html = placement_page(request).content.decode()
    assert "<script>x</script>" not in html and "&lt;script&gt;" in html
    request = RequestFactory().get("/placement/", {"tab": "placement", "gpus": 4})
    request.user = user
    html = placement_page(request).content.decode()
    assert 'id="placement-nodes"' in html and "NV18" in html and "dgx-01" in html
    request = RequestFactory().get(
        "/placement/", {"tab": "placement", "gpus": 4, "scheduler": "slurm", "cluster": "prod"}
    )
    request.user = user
    html = placement_page(request).content.decode()
    assert "Scheduler: prod is a Kubernetes cluster, not Slurm" in html
    assert '<option value="slurm" selected>' in html
    for tab, marker in (("failure", "rack-ranking"), ("capacity", "capacity-layouts")):
        request = RequestFactory().get("/placement/", {"tab": tab, "gpus": 80, "server": "dgx-01"})
        request.user = user
        assert f'id="{marker}"' in placement_page(request).content.decode()
