"""Issue 26: a field of the wrong type anywhere in a pods list or a node list is a 400 that
names its path (``items[3].spec.containers[0].resources.requests``), never a 500, and
nothing is stored."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from clusters.models import ClusterSnapshot, Node
from clusters.parsers import SnapshotFormatError, parse_pods
from clusters.parsers.kubernetes import parse_kubernetes
from tests.fixtures.scheduler import fixture_json
from tests.nodes import k8s_node, k8s_node_list

PODS = fixture_json("k8s-kubectl-get-pods-gpu.json")
SERVE = 3  # serve-0: an app container, a sidecar and an init container


def with_value(document: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    broken = copy.deepcopy(document)
    parent = broken
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return broken


POD_CASES = [
    (("spec", "containers"), "x", "spec.containers: expected a list, got a string"),
    (("spec", "containers"), {"name": "a"}, "spec.containers: expected a list, got an object"),
    (("spec", "containers", 0), 7, "spec.containers[0]: expected an object, got a number"),
    (("spec", "containers", 0), ["a"], "spec.containers[0]: expected an object, got a list"),
    (("spec", "initContainers"), "x", "spec.initContainers: expected a list, got a string"),
    (
        ("spec", "initContainers", 0),
        "x",
        "spec.initContainers[0]: expected an object, got a string",
    ),
    (
        ("spec", "containers", 0, "resources"),
        [],
        "spec.containers[0].resources: expected an object, got a list",
    ),
    (
        ("spec", "containers", 0, "resources"),
        "4",
        "spec.containers[0].resources: expected an object, got a string",
    ),
    (
        ("spec", "containers", 0, "resources", "requests"),
        "x",
        "spec.containers[0].resources.requests: expected an object, got a string",
    ),
    (
        ("spec", "containers", 0, "resources", "requests"),
        8,
        "spec.containers[0].resources.requests: expected an object, got a number",
    ),
    (
        ("spec", "containers", 0, "resources", "limits"),
        ["nvidia.com/gpu"],
        "spec.containers[0].resources.limits: expected an object, got a list",
    ),
    (
        ("spec", "initContainers", 0, "resources", "limits"),
        True,
        "spec.initContainers[0].resources.limits: expected an object, got a boolean",
    ),
    (
        ("spec", "containers", 0, "resources", "requests", "nvidia.com/gpu"),
        {"count": 2},
        "spec.containers[0].resources.requests.nvidia.com/gpu: expected a quantity",
    ),
    (("metadata",), "serve-0", "metadata: expected an object, got a string"),
    (("metadata", "name"), 7, "metadata.name: expected a string, got a number"),
    (("metadata", "namespace"), ["ml"], "metadata.namespace: expected a string, got a list"),
    (("metadata", "ownerReferences"), {"kind": "x"}, "metadata.ownerReferences: expected a list"),
    (("metadata", "ownerReferences"), ["rs"], "metadata.ownerReferences[0]: expected an object"),
    (
        ("metadata", "ownerReferences"),
        [{"kind": 7, "name": "train"}],
        "metadata.ownerReferences[0].kind: expected a string, got a number",
    ),
    (
        ("metadata", "ownerReferences"),
        [{"kind": "Job", "name": ["train"]}],
        "metadata.ownerReferences[0].name: expected a string, got a list",
    ),
    (
        ("metadata", "ownerReferences"),
        [{"kind": "Job", "name": "train", "controller": "yes"}],
        "metadata.ownerReferences[0].controller: expected a boolean, got a string",
    ),
    (("metadata", "labels"), ["user=alice"], "metadata.labels: expected an object, got a list"),
    (("metadata", "labels"), {"user": ["a"]}, "metadata.labels.user: expected a string"),
    (("metadata", "creationTimestamp"), 1733, "metadata.creationTimestamp: expected a string"),
    (("metadata", "uid"), {"id": 1}, "metadata.uid: expected a string, got an object"),
    (("spec", "priorityClassName"), ["high"], "spec.priorityClassName: expected a string"),
    (("spec", "containers", 0, "name"), 3, "spec.containers[0].name: expected a string"),
    (("status", "startTime"), 5, "status.startTime: expected a string, got a number"),
    (("status", "startTime"), "yesterday", "status.startTime: expected an RFC 3339 time"),
    (("status", "reason"), ["Evicted"], "status.reason: expected a string, got a list"),
    (("status", "containerStatuses"), {"a": 1}, "status.containerStatuses: expected a list"),
    (
        ("status", "containerStatuses"),
        [{"name": "server", "state": {"terminated": "OOMKilled"}}],
        "status.containerStatuses[0].state.terminated: expected an object, got a string",
    ),
    (
        ("status", "initContainerStatuses"),
        [{"name": "warmup", "state": {"terminated": {"reason": 137}}}],
        "status.initContainerStatuses[0].state.terminated.reason: expected a string",
    ),
    (
        ("status", "containerStatuses"),
        [{"name": "server", "state": {"terminated": {"finishedAt": "at noon"}}}],
        "status.containerStatuses[0].state.terminated.finishedAt: expected an RFC 3339 time",
    ),
    (("spec",), [], "spec: expected an object, got a list"),
    (("spec", "nodeName"), 5, "spec.nodeName: expected a string, got a number"),
    (("spec", "nodeName"), {"name": "a"}, "spec.nodeName: expected a string, got an object"),
    (("status",), "Running", "status: expected an object, got a string"),
    (("status", "phase"), ["Running"], "status.phase: expected a string, got a list"),
]


@pytest.fixture
def post(staff, django_capture_on_commit_callbacks):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(staff)

    def post(body: str):
        with django_capture_on_commit_callbacks(execute=True):
            return client.generic("POST", "/api/v1/clusters/c/snapshots/", body, "text/plain")

    return post


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "value", "words"), POD_CASES)
def test_a_pods_list_with_a_wrong_type_is_a_400_naming_the_path_and_stores_nothing(
    post, path, value, words
):
    names = ("dgx-h100-01", "a100-ts-01", "h100-mig-01", "cpu-01")
    assert post(k8s_node_list(*(k8s_node(n) for n in names))).status_code == 201
    response = post(json.dumps(with_value(PODS, ("items", SERVE, *path), value)))
    assert response.status_code == 400, response.content
    message = " ".join(response.json()["errors"]["body"])
    assert f"items[{SERVE}].{words}" in message, message
    assert ClusterSnapshot.objects.filter(cluster_name="c").count() == 1  # the node list
    assert set(Node.objects.values_list("gpu_used", flat=True)) == {None}


def test_the_unbroken_pods_list_still_parses():
    assert len(parse_pods(copy.deepcopy(PODS))) == len(PODS["items"])


@pytest.mark.parametrize(("path", "value", "words"), POD_CASES)
def test_one_pod_object_names_its_paths_from_the_root(path, value, words):
    pod = with_value(PODS["items"][SERVE], path, value)
    with pytest.raises(SnapshotFormatError) as caught:
        parse_pods(pod)
    assert str(caught.value).startswith(words), caught.value


def test_an_item_that_is_not_an_object_names_its_index():
    with pytest.raises(SnapshotFormatError, match=r"items\[1\]: expected an object, got a string"):
        parse_pods({"kind": "PodList", "items": [PODS["items"][0], "pod"]})


NODES = json.loads(k8s_node_list(k8s_node("a"), k8s_node("b", unschedulable=True)))

NODE_CASES = [
    (("metadata",), "b", "metadata: expected an object, got a string"),
    (("metadata", "labels"), ["x"], "metadata.labels: expected an object, got a list"),
    (
        ("metadata", "labels", "nvidia.com/gpu.product"),
        {"a": 1},
        "metadata.labels.nvidia.com/gpu.product: expected a string, got an object",
    ),
    (("spec",), 1, "spec: expected an object, got a number"),
    (("spec", "unschedulable"), "false", "spec.unschedulable: expected a boolean, got a string"),
    (("spec", "taints"), {"key": "k"}, "spec.taints: expected a list, got an object"),
    (("spec", "taints"), ["k=v:NoSchedule"], "spec.taints[0]: expected an object, got a string"),
    (("spec", "taints"), [{"key": ["k"]}], "spec.taints[0].key: expected a string, got a list"),
    (("status",), [], "status: expected an object, got a list"),
    (("status", "capacity"), "8", "status.capacity: expected an object, got a string"),
    (("status", "allocatable"), [], "status.allocatable: expected an object, got a list"),
    (("status", "capacity", "cpu"), {"n": 1}, "status.capacity.cpu: expected a quantity"),
    (("status", "capacity", "nvidia.com/gpu"), [8], "status.capacity.nvidia.com/gpu: expected"),
    (("status", "allocatable", "nvidia.com/gpu"), True, "status.allocatable.nvidia.com/gpu"),
    (("status", "addresses"), "10.0.0.1", "status.addresses: expected a list, got a string"),
    (("status", "addresses", 0), "10.0.0.1", "status.addresses[0]: expected an object"),
    (("status", "addresses", 0, "address"), {}, "status.addresses[0].address: expected a string"),
    (("status", "conditions", 0), "Ready", "status.conditions[0]: expected an object"),
    (("status", "conditions", 0, "status"), [], "status.conditions[0].status: expected a string"),
    (("status", "nodeInfo"), "v1.30", "status.nodeInfo: expected an object, got a string"),
    (("status", "nodeInfo", "kubeletVersion"), 1.3, "status.nodeInfo.kubeletVersion: expected"),
    (("status", "nodeInfo", "systemUUID"), [], "status.nodeInfo.systemUUID: expected a string"),
]


@pytest.mark.parametrize(("path", "value", "words"), NODE_CASES)
def test_a_node_list_with_a_wrong_type_names_the_path(path, value, words):
    with pytest.raises(SnapshotFormatError) as caught:
        parse_kubernetes(with_value(NODES, ("items", 1, *path), value))
    assert str(caught.value).startswith(f"items[1].{words}"), caught.value


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "value", "words"), NODE_CASES[::4])
def test_a_node_list_with_a_wrong_type_is_a_400_and_keeps_the_node_set(post, path, value, words):
    assert post(k8s_node_list(k8s_node("old"))).status_code == 201
    response = post(json.dumps(with_value(NODES, ("items", 1, *path), value)))
    assert response.status_code == 400, response.content
    assert f"items[1].{words}" in " ".join(response.json()["errors"]["body"])
    assert list(Node.objects.values_list("name", flat=True)) == ["old"]
    assert ClusterSnapshot.objects.filter(cluster_name="c").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("value", [-1, "-1", "-500m"])
def test_a_negative_gpu_request_is_a_400_naming_the_path_not_a_500(post, value):
    """Found by the intakes fuzzer: -1 passed the parser and broke a positive column."""
    names = ("dgx-h100-01", "a100-ts-01", "h100-mig-01", "cpu-01")
    assert post(k8s_node_list(*(k8s_node(n) for n in names))).status_code == 201
    path = ("items", 0, "spec", "containers", 0, "resources", "requests", "nvidia.com/gpu")
    response = post(json.dumps(with_value(PODS, path, value)))
    assert response.status_code == 400, response.content
    message = " ".join(response.json()["errors"]["body"])
    assert "items[0].spec.containers[0].resources.requests.nvidia.com/gpu" in message, message
    assert "never negative" in message


def test_a_negative_node_capacity_names_its_path():
    node = k8s_node("a")
    node["status"]["capacity"]["nvidia.com/gpu"] = "-2"
    with pytest.raises(SnapshotFormatError, match=r"items\[0\]\.status\.capacity\.nvidia\.com/gpu"):
        parse_kubernetes({"kind": "NodeList", "items": [node]})
