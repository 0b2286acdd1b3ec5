"""A snapshot too large to apply in the request is checked as the worker would check it
before the 202: every reason its apply can refuse it is a field-level 400 at once, nothing
stored. The 202 is kept for the writes; what the database alone can refuse then is on the
status URL, with its reason and never a traceback."""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError

from clusters.models import Cluster, ClusterSnapshot, Node
from clusters.services import snapshot_apply
from tests.nodes import k8s_node, k8s_node_list, scontrol_node, scontrol_text

pytestmark = pytest.mark.django_db

SYNC_MAX = 100  # every body below is larger: each takes the worker's path


@pytest.fixture
def queued(monkeypatch) -> list[int]:
    """The ids a large snapshot's 202 hands the worker, which has not run yet."""
    ids: list[int] = []
    monkeypatch.setattr("clusters.api.views.enqueue_snapshot", ids.append)
    return ids


@pytest.fixture
def post(staff_api, django_capture_on_commit_callbacks, settings):
    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = SYNC_MAX

    def post(name: str, body: str | bytes):
        assert len(body) > SYNC_MAX
        with django_capture_on_commit_callbacks(execute=True):
            return staff_api.generic(
                "POST", f"/api/v1/clusters/{name}/snapshots/", body, "text/plain"
            )

    return post


def _small(name: str, body: str) -> None:
    """A node set posted below the threshold: the cluster exists, of that kind."""
    from clusters.services import snapshot_ingest

    snapshot_ingest(cluster_name=name, raw=body)


def _node_with(section: str, key: str, value) -> str:
    node = k8s_node("dgx-02")
    node["status"][section][key] = value
    return k8s_node_list(k8s_node("dgx-01"), node)


def _wrong_type_at(path: tuple, value) -> str:
    document = json.loads(k8s_node_list(k8s_node("dgx-01"), k8s_node("dgx-02")))
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return json.dumps(document)


def _pod(name: str, *, node: str = "dgx-01", gpus: str = "2", containers=None) -> dict:
    resources = {"limits": {"nvidia.com/gpu": gpus}}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {
            "nodeName": node,
            "containers": containers
            if containers is not None
            else [{"name": "main", "resources": resources}],
        },
        "status": {"phase": "Running"},
    }


def _pods(*pods: dict) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(pods)})


def _slurm_json_twice() -> str:
    from tests.fixtures.scheduler import fixture_json

    document = fixture_json("slurmrestd-v0.0.41-nodes.json")
    document["nodes"].append(document["nodes"][0])
    return json.dumps(document)


YAML_ALIASES = """apiVersion: v1
kind: List
metadata: {}
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1, labels: {nvidia.com/x: *a}}
"""

# (what the worker would refuse, the body, the field named, words of its message)
REASONS = [
    ("JSON beyond RFC 8259", k8s_node_list(k8s_node("a")).replace('"224"', "NaN"), "body", "RFC"),
    ("JSON nested too deep", '{"kind": "List", "items": ' + "[" * 10_000, "body", "deeper"),
    (
        "a lone surrogate in a name",
        json.dumps({"kind": "List", "items": [k8s_node("\ud800"), k8s_node("b")]}),
        "items.0.metadata.name",
        "",
    ),
    ("a JSON list, not an object", json.dumps([k8s_node("a"), k8s_node("b")]), "body", "list"),
    (
        "a JSON object of no known shape",
        json.dumps({"spam": ["x" * 50] * 4}),
        "body",
        "unknown shape",
    ),
    (
        "a Kubernetes object that is not a node list",
        json.dumps({"kind": "Deployment", "spec": {"replicas": 3, "x": "y" * 100}}),
        "body",
        "'Deployment'",
    ),
    (
        "a kubectl list naming a node twice",
        k8s_node_list(k8s_node("dgx-01"), k8s_node("dgx-01")),
        "body",
        "names node 'dgx-01' twice",
    ),
    (
        "a wrong type deep in a node",
        _wrong_type_at(("items", 1, "status", "addresses"), "10.0.0.1"),
        "body",
        "items[1].status.addresses: expected a list, got a string",
    ),
    (
        "a count beyond its column",
        _node_with("capacity", "cpu", "2147483648"),
        "nodes.1.cpus",
        "outside 0..2147483647",
    ),
    (
        "a name beyond its column",
        k8s_node_list(k8s_node("dgx-01"), k8s_node("n" * 254)),
        "nodes.1.name",
        "at most 253",
    ),
    ("a Slurm response naming a node twice", _slurm_json_twice(), "body", "twice"),
    (
        "scontrol text naming a node twice",
        scontrol_text(*(scontrol_node(f"n{i}") for i in range(3)), scontrol_node("n1")),
        "body",
        "scontrol output names node 'n1' twice",
    ),
    (
        "a GRES count beyond its column in scontrol text",
        scontrol_text(scontrol_node("a"), scontrol_node("b", gres="gpu:h100:99999999999")),
        "nodes.1.gpu_capacity",
        "outside",
    ),
    ("YAML with aliases", YAML_ALIASES, "body", "alias"),
    ("no known format", "hello world\n" * 20, "body", "unrecognised snapshot format"),
    (
        "a pod list of a cluster never posted",
        _pods(_pod("a"), _pod("b")),
        "body",
        "post the node list of Kubernetes cluster 'c' before its pods",
    ),
]


@pytest.mark.parametrize(
    ("body", "field", "words"), [r[1:] for r in REASONS], ids=[r[0] for r in REASONS]
)
def test_a_large_snapshot_the_worker_would_refuse_is_a_400_naming_the_field(
    post, queued, body, field, words
):
    response = post("c", body)
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert words in " ".join(errors[field]), errors
    assert not ClusterSnapshot.objects.exists() and not queued


POD_REASONS = [
    (
        "containers a string",
        _pods(_pod("a", containers="main"), _pod("b")),
        "items[0].spec.containers: expected a list, got a string",
    ),
    (
        "resources a list",
        _pods(_pod("a", containers=[{"name": "m", "resources": ["limits"]}]), _pod("b")),
        "items[0].spec.containers[0].resources: expected an object, got a list",
    ),
    (
        "limits a number",
        _pods(_pod("a", containers=[{"name": "m", "resources": {"limits": 4}}]), _pod("b")),
        "items[0].spec.containers[0].resources.limits: expected an object, got a number",
    ),
]


@pytest.mark.parametrize(
    ("body", "words"), [r[1:] for r in POD_REASONS], ids=[r[0] for r in POD_REASONS]
)
def test_a_large_pod_list_of_the_wrong_shape_is_a_400_naming_the_path(post, queued, body, words):
    _small("c", k8s_node_list(k8s_node("dgx-01")))
    response = post("c", body)
    assert response.status_code == 400, response.content
    assert words in " ".join(response.json()["errors"]["body"])
    assert ClusterSnapshot.objects.count() == 1 and not queued  # the node list alone


def test_a_large_pod_list_naming_a_pod_twice_is_a_400_naming_it(post, queued):
    _small("c", k8s_node_list(k8s_node("dgx-01")))
    response = post("c", _pods(_pod("a"), _pod("b"), _pod("a")))
    assert response.status_code == 400, response.content
    assert response.json()["errors"] == {
        "items[2].metadata.name": ["pod 'ml/a' is listed twice (first as items[0])"]
    }
    assert not queued


def test_a_large_pod_list_requesting_more_gpus_than_a_column_holds_is_a_400(post, queued):
    _small("c", k8s_node_list(k8s_node("dgx-01")))
    response = post("c", _pods(_pod("a", gpus=str(2**31)), _pod("b")))
    assert response.status_code == 400, response.content
    (message,) = response.json()["errors"]["pods"]
    assert message.startswith("pods on node 'dgx-01' request 2147483650 GPUs")
    assert not queued


def test_a_large_pod_list_of_a_slurm_cluster_is_a_400(post, queued):
    _small("c", scontrol_node("gpu-01"))
    response = post("c", _pods(_pod("a"), _pod("b")))
    assert response.status_code == 400
    assert "before its pods" in response.json()["errors"]["body"][0]


def test_a_large_json_snapshot_of_the_other_kind_is_a_400(post, queued):
    _small("c", scontrol_node("gpu-01"))
    response = post("c", k8s_node_list(k8s_node("dgx-01"), k8s_node("dgx-02")))
    assert response.status_code == 400
    assert response.json()["errors"]["body"] == [
        "cluster 'c' is a Slurm cluster; this is a kubernetes snapshot"
    ]
    assert not queued


def test_a_good_large_snapshot_is_still_a_202_that_the_worker_applies(post, queued, staff_api):
    response = post("c", k8s_node_list(k8s_node("dgx-01"), k8s_node("dgx-02")))
    assert response.status_code == 202, response.content
    assert Node.objects.count() == 0  # the writes are the worker's
    assert snapshot_apply(snapshot_id=queued[0]) == "applied"
    assert staff_api.get(response.json()["url"]).json()["status"] == "applied"
    assert Node.objects.count() == 2


# What only the worker can find: the status URL says why -------------------------------------


def test_a_cluster_taken_by_the_other_kind_before_the_worker_runs_fails_with_the_reason(
    post, queued, staff_api
):
    response = post("c", scontrol_text(*(scontrol_node(f"n{i}") for i in range(3))))
    assert response.status_code == 202, response.content
    _small("c", k8s_node_list(k8s_node("dgx-01")))  # a Kubernetes list took the name first
    assert snapshot_apply(snapshot_id=queued[0]) == "failed"
    status = staff_api.get(response.json()["url"]).json()
    assert status["status"] == "failed"
    assert status["message"] == "cluster 'c' is a Kubernetes cluster; this is a slurm snapshot"
    assert status["errors"] == {"body": [status["message"]]}
    assert Cluster.objects.get(name="c").last_error == status["message"]
    assert list(Node.objects.values_list("name", flat=True)) == ["dgx-01"]


def test_a_snapshot_the_database_refuses_fails_with_its_reason_not_a_traceback(
    post, queued, staff_api, monkeypatch
):
    response = post("c", k8s_node_list(k8s_node("dgx-01"), k8s_node("dgx-02")))
    assert response.status_code == 202

    def refused(**kwargs):
        raise IntegrityError('duplicate key value violates unique constraint "clusters_node"')

    monkeypatch.setattr("clusters.services.node_set_replace", refused)
    assert snapshot_apply(snapshot_id=queued[0]) == "failed"
    status = staff_api.get(response.json()["url"]).json()
    assert status["status"] == "failed"
    assert status["message"] == (
        "the database refused this snapshot (IntegrityError); the node set stays as it was"
    )
    assert "Traceback" not in json.dumps(status) and "duplicate key" not in json.dumps(status)
    assert snapshot_apply(snapshot_id=queued[0]) == "skipped"  # never retried
    assert not Node.objects.exists()
