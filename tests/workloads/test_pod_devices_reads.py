"""Issue 24: the device IDs pods hold are read through the nodes they run on, in a fixed
number of queries however many pods are asked about."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from clusters.models import Cluster, Node
from clusters.parsers import parse_pods
from inventory.models import Gpu, MigDevice, Server
from tests.workloads.pods import k8s_pod, pod_list
from workloads.models import PodDevice
from workloads.services.pods import known_device_uuids, pod_devices_for, pod_workloads

pytestmark = pytest.mark.django_db


def server(hostname: str) -> Server:
    return Server.objects.create(identity=f"hostname:{hostname}", hostname=hostname)


def node(cluster: Cluster, name: str, on: Server | None, **fields) -> Node:
    return Node.objects.create(cluster=cluster, name=name, kind=cluster.kind, server=on, **fields)


def device(on: Server, ns: str, pod: str, device_id: str, resource="nvidia.com/gpu", c="main"):
    return PodDevice.objects.create(
        server=on, namespace=ns, pod=pod, container=c, resource=resource, device_id=device_id
    )


@pytest.fixture
def fleet():
    k8s = Cluster.objects.create(name="k8s", kind="kubernetes")
    other = Cluster.objects.create(name="other", kind="kubernetes")
    a, b, c = server("dgx-a"), server("dgx-b"), server("dgx-c")
    node(k8s, "dgx-a", a)
    node(k8s, "dgx-b", b)
    node(other, "dgx-c", c)
    node(k8s, "old-b", b, gone_at=timezone.now() - timedelta(days=1))
    for i in range(2):
        gpu = Gpu.objects.create(server=a, index=i, uuid=f"GPU-a{i}")
        Gpu.objects.create(server=b, index=i, uuid=f"GPU-b{i}")
    MigDevice.objects.create(gpu=gpu, uuid="MIG-a1-0", profile="1g.10gb")
    device(a, "ml", "train-0", "GPU-a0")
    device(a, "ml", "train-0", "GPU-a1", c="sidecar")
    device(a, "ml", "train-0", "mlx5_0", resource="rdma/hca")
    device(b, "ml", "train-1", "GPU-b0")
    device(b, "ml", "train-0", "GPU-b1")  # a stale row: train-0 ran on dgx-b before
    device(c, "ml", "train-2", "GPU-c0")  # another cluster's server
    device(a, "serve", "train-0", "GPU-a1")  # same pod name, another namespace
    return k8s


def test_the_devices_of_the_pods_asked_about(fleet, django_assert_num_queries):
    with django_assert_num_queries(1):
        found = pod_devices_for(fleet, [("ml", "train-0"), ("ml", "train-1"), ("ml", "train-2")])
    assert {key: sorted(pairs) for key, pairs in found.items()} == {
        ("ml", "train-0"): [
            ("nvidia.com/gpu", "GPU-a0"),
            ("nvidia.com/gpu", "GPU-a1"),
            ("nvidia.com/gpu", "GPU-b1"),
            ("rdma/hca", "mlx5_0"),
        ],
        ("ml", "train-1"): [("nvidia.com/gpu", "GPU-b0")],
    }


def test_the_pods_node_keeps_only_what_its_server_says(fleet):
    found = pod_devices_for(
        fleet, [("ml", "train-0"), ("ml", "train-1")], nodes={("ml", "train-0"): "dgx-a"}
    )
    assert sorted(found[("ml", "train-0")]) == [
        ("nvidia.com/gpu", "GPU-a0"),
        ("nvidia.com/gpu", "GPU-a1"),
        ("rdma/hca", "mlx5_0"),
    ]
    assert found[("ml", "train-1")] == [("nvidia.com/gpu", "GPU-b0")]


def test_many_pods_are_one_query_too(fleet, django_assert_num_queries):
    keys = [("ml", f"p-{i}") for i in range(2000)] + [("ml", "train-1")]
    with django_assert_num_queries(1):
        found = pod_devices_for(fleet, keys)
    assert found == {("ml", "train-1"): [("nvidia.com/gpu", "GPU-b0")]}
    assert pod_devices_for(fleet, []) == {}


def test_the_uuids_each_bound_node_has(fleet, django_assert_num_queries):
    node(fleet, "unbound", None)
    with django_assert_num_queries(3):
        known = known_device_uuids(fleet, ["dgx-a", "dgx-b", "unbound", "dgx-c", "old-b"])
    assert known == {"dgx-a": {"GPU-a0", "GPU-a1", "MIG-a1-0"}, "dgx-b": {"GPU-b0", "GPU-b1"}}


def test_a_pod_list_becomes_workloads_with_their_devices(fleet, django_assert_num_queries):
    owner = ("StatefulSet", "train")
    pods = parse_pods(
        pod_list(
            k8s_pod("train-0", node="dgx-a", gpus=2, owner=owner),
            k8s_pod("train-1", node="dgx-b", gpus=2, owner=owner),
            k8s_pod("cpu-0", node="dgx-b"),
        )
    )
    device(Server.objects.get(hostname="dgx-b"), "ml", "train-1", "GPU-not-here")
    with django_assert_num_queries(5):
        snapshot, unknown = pod_workloads(cluster=fleet, pods=pods)
    (train,) = snapshot.workloads
    slots = {a.node: sorted(s.uuid or "" for s in a.gpus) for a in train.allocations}
    # train-0's stale row on dgx-b is not dgx-a's; dgx-b's GPU-b1 row is train-0's, not train-1's.
    assert slots == {"dgx-a": ["GPU-a0", "GPU-a1"], "dgx-b": ["GPU-b0"]}
    assert [(u.node, u.pod, u.device_id) for u in unknown] == [("dgx-b", "train-1", "GPU-not-here")]
