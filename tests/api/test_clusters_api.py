"""Scheduler API: snapshots in (any supported format), nodes, findings, bindings, secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster, Node
from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from tests.nodes import k8s_node, k8s_node_list, scontrol_node, scontrol_text
from tests.reports import apply_reports as load
from tests.reports import make_report

pytestmark = pytest.mark.django_db
SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"


@pytest.fixture
def admin_api(staff):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(staff)
    return client


@pytest.fixture(autouse=True)
def _run_on_commit(django_capture_on_commit_callbacks):
    """Snapshots enqueue reconciliation after commit; run it, as a worker would."""
    global _capture
    _capture = django_capture_on_commit_callbacks


def post_snapshot(client, name, body, content_type="text/plain"):
    with _capture(execute=True):
        return client.generic(
            "POST", f"/api/v1/clusters/{name}/snapshots/", body, content_type=content_type
        )


def test_posting_a_nodelist_creates_the_cluster_and_binds(admin_api):
    load(make_report("dgx-01"))
    uuid = make_report("dgx-01")["host"]["system_uuid"]
    response = post_snapshot(
        admin_api, "prod", k8s_node_list(k8s_node("dgx-01", system_uuid=uuid)), "application/json"
    )
    assert response.status_code == 201, response.content
    answer = response.json()
    assert answer == {
        "id": answer["id"],
        "url": f"http://testserver/api/v1/clusters/prod/snapshots/{answer['id']}/",
        "status": "applied",
        "message": "",
        "cluster": "prod",
        "kind": "kubernetes",
        "format": "kubernetes-nodelist",
        "nodes": 1,
        "added": 1,
        "gone": 0,
        "pods": None,
    }
    node = admin_api.get("/api/v1/nodes/?cluster=prod").json()["results"][0]
    for field in (
        "id",
        "name",
        "cluster",
        "kind",
        "server",
        "gpu_capacity",
        "gpu_allocatable",
        "gpu_used",
        "state",
    ):
        assert field in node
    assert node["kind"] == "kubernetes" and node["server_hostname"] == "dgx-01"
    assert node["gpu_capacity"] == 8 and node["agent_gpu_count"] == 8


@pytest.mark.parametrize(
    "sample",
    [
        "slurm-local-2205-scontrol-show-node.txt",
        "slurm-local-2205-scontrol-o-show-node.txt",
        "slurm-local-2205-sinfo.json",
        "slurm-local-2205-slurmrestd-v0.0.38-nodes.json",
    ],
)
def test_real_slurm_outputs_are_accepted(admin_api, sample):
    body = (SAMPLES / sample).read_bytes()
    response = post_snapshot(admin_api, "ci", body)
    assert response.status_code == 201, response.content
    nodes = admin_api.get("/api/v1/nodes/?cluster=ci").json()["results"]
    assert [n["name"] for n in nodes] == ["gpu-node1", "gpu-node2", "gpu-node3", "gpu-node4"]
    assert {n["gpu_capacity"] for n in nodes} == {8} and {n["kind"] for n in nodes} == {"slurm"}


def test_unknown_format_is_400_naming_the_formats_and_keeps_the_node_set(admin_api):
    post_snapshot(admin_api, "hpc", scontrol_text(scontrol_node("a"), scontrol_node("b")))
    response = post_snapshot(admin_api, "hpc", "hello, this is not a snapshot")
    assert response.status_code == 400
    message = response.json()["errors"]["body"][0]
    assert "scontrol show node" in message and "kubectl get nodes -o json" in message
    assert sorted(Node.objects.filter(gone_at__isnull=True).values_list("name", flat=True)) == [
        "a",
        "b",
    ]


def test_a_snapshot_of_the_other_kind_is_400(admin_api):
    post_snapshot(admin_api, "hpc", scontrol_node("a"))
    response = post_snapshot(admin_api, "hpc", k8s_node_list(k8s_node("x")), "application/json")
    assert response.status_code == 400 and "Slurm cluster" in response.json()["errors"]["body"][0]


def test_readers_cannot_post_snapshots_and_anonymous_cannot_read(api, client):
    assert post_snapshot(api, "hpc", scontrol_node("a")).status_code == 403
    for path in ("/api/v1/clusters/", "/api/v1/nodes/", "/api/v1/findings/"):
        assert client.get(path).status_code == 401


def test_pods_snapshot_sets_gpus_in_use(admin_api):
    post_snapshot(
        admin_api, "prod", k8s_node_list(k8s_node("n1"), k8s_node("n2")), "application/json"
    )
    pods = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "kind": "Pod",
                "metadata": {"name": "train-0", "namespace": "ml"},
                "spec": {
                    "nodeName": "n1",
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "4"}}}],
                },
                "status": {"phase": "Running"},
            },
            {
                "kind": "Pod",
                "metadata": {"name": "done", "namespace": "ml"},
                "spec": {
                    "nodeName": "n1",
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "4"}}}],
                },
                "status": {"phase": "Succeeded"},
            },
        ],
    }
    response = post_snapshot(admin_api, "prod", json.dumps(pods), "application/json")
    assert response.status_code == 201 and response.json()["pods"] == 2
    used = dict(Node.objects.values_list("name", "gpu_used"))
    assert used == {"n1": 4, "n2": 0}
    # a later node list keeps what the pods said
    post_snapshot(
        admin_api, "prod", k8s_node_list(k8s_node("n1"), k8s_node("n2")), "application/json"
    )
    assert Node.objects.get(name="n1").gpu_used == 4


def test_findings_filter_by_type_severity_open_and_cluster(admin_api):
    load(make_report("dgx-01"))
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(k8s_node("ghost", gpus=8)))
    reconcile_all()
    rows = admin_api.get("/api/v1/findings/?open=true&cluster=prod").json()["results"]
    assert [r["type"] for r in rows] == ["node_without_server"]
    for field in (
        "id",
        "type",
        "severity",
        "subject",
        "message",
        "first_seen",
        "last_seen",
        "resolved_at",
    ):
        assert field in rows[0]
    assert admin_api.get("/api/v1/findings/?type=server_without_node").json()["count"] == 1
    assert admin_api.get("/api/v1/findings/?severity=critical").json()["count"] == 0


def test_manual_binding_endpoint(admin_api, api):
    servers = load(make_report("dgx-01"))
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(k8s_node("mystery")))
    node = Node.objects.get()
    url = f"/api/v1/nodes/{node.pk}/binding/"
    assert api.post(url, {"server": servers["dgx-01"].pk}, format="json").status_code == 403
    response = admin_api.post(url, {"server": servers["dgx-01"].pk}, format="json")
    assert response.status_code == 200
    assert (
        response.json()["binding_method"] == "manual"
        and response.json()["server"] == servers["dgx-01"].pk
    )
    assert admin_api.post(url, {"server": 99999}, format="json").status_code == 400


def test_cluster_secrets_are_write_only(admin_api):
    response = admin_api.post(
        "/api/v1/clusters/",
        {
            "name": "hpc",
            "kind": "slurm",
            "source": "slurmrestd",
            "slurmrestd_url": "http://slurm.example:6820",
            "slurmrestd_user": "atlas",
            "slurmrestd_token": "eyJhbGciOiJIUzI1NiJ9.secret.jwt",
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    assert "secret" not in response.content.decode()
    listed = admin_api.get("/api/v1/clusters/hpc/").content.decode()
    assert "eyJ" not in listed and json.loads(listed)["has_token"] is True
    assert Cluster.objects.get().slurmrestd_token.startswith("eyJ")


@pytest.mark.parametrize("path", ["/api/v1/nodes/", "/api/v1/findings/", "/api/v1/clusters/"])
def test_query_count_is_the_same_for_few_and_many_nodes(admin_api, path):
    def queries():
        with CaptureQueriesContext(connection) as ctx:
            assert admin_api.get(path + "?page_size=1000").status_code == 200
        return len(ctx.captured_queries)

    def fleet(n, offset):
        reports = [make_report(f"s{offset + i}", gpus=1, nics=0) for i in range(n)]
        load(*reports)
        snapshot_ingest(
            cluster_name=f"c{offset}",
            raw=k8s_node_list(
                *(
                    k8s_node(r["host"]["hostname"], system_uuid=r["host"]["system_uuid"], gpus=2)
                    for r in reports
                )
            ),
        )
        reconcile_all()

    fleet(2, 0)
    few = queries()
    fleet(30, 100)
    assert queries() == few


def test_a_sync_asked_while_the_broker_is_away_is_a_503_not_a_500(admin_api, monkeypatch):
    Cluster.objects.create(
        name="hpc", kind="slurm", source="slurmrestd", slurmrestd_url="http://127.0.0.1:1/"
    )

    def broker_down(*args, **kwargs):
        raise ConnectionRefusedError("redis://:secret@127.0.0.1:6379 refused")

    from clusters import tasks

    monkeypatch.setattr(tasks.sync_cluster, "apply_async", broker_down)
    response = admin_api.post("/api/v1/clusters/hpc/sync/")
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "30"
    assert "secret" not in response.content.decode()
