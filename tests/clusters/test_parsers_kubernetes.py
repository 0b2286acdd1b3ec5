"""Kubernetes nodes (NodeList, List, Node, describe text) and pods."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from clusters.parsers import SnapshotFormatError, gpu_used_by_node, parse_pods
from clusters.parsers.kubernetes import gfd_facts, parse_kubernetes, parse_node, parse_quantity
from clusters.parsers.kubernetes_describe import parse_describe
from tests.fixtures.scheduler import fixture_json, fixture_text, sample_text

FLEET = "k8s-kubectl-get-nodes-gpu-fleet.json"


@pytest.fixture
def fleet():
    return fixture_json(FLEET)


def _by_name(snapshot):
    return {n.name: n for n in snapshot.nodes}


def test_kubectl_list_of_nodes(fleet):
    snapshot = parse_kubernetes(fleet)
    assert snapshot.format == "kubernetes-nodelist"
    assert snapshot.kind == "kubernetes"
    assert snapshot.cluster_name is None
    assert [n.name for n in snapshot.nodes] == [
        "dgx-h100-01",
        "a100-ts-01",
        "h100-mig-01",
        "gpu-b02",
        "cpu-01",
        "l40s-mps-01",
    ]


def test_api_nodelist_without_item_kinds_reads_the_same(fleet):
    api = copy.deepcopy(fleet)
    api["kind"] = "NodeList"
    api["metadata"] = {"resourceVersion": "48213999"}
    for item in api["items"]:
        item.pop("kind")
        item.pop("apiVersion")
    assert parse_kubernetes(api).nodes == parse_kubernetes(fleet).nodes


def test_eight_h100_node_identity_and_gfd_labels(fleet):
    node = _by_name(parse_kubernetes(fleet))["dgx-h100-01"]
    # Kubernetes upper-cases this UUID; the kernel's product_uuid is lower-case.
    assert node.system_uuid == "4c4c4544-0042-4810-8056-b4c04f335a33"
    assert node.machine_id == "9f1c2e5b7a6d4e3f8a1b2c3d4e5f6a7b"
    assert node.hostname == "dgx-h100-01"
    assert node.addresses == ["10.20.1.11", "dgx-h100-01"]
    assert (node.gpu_capacity, node.gpu_allocatable, node.gpu_used) == (8, 8, None)
    assert node.gpu_product == "NVIDIA-H100-80GB-HBM3"
    assert node.gpu_count_label == 8
    assert node.gpu_memory_label_mib == 81559
    assert node.gpu_replicas == 1
    assert node.sharing_strategy == "none"
    assert node.mig_strategy == "single"
    assert node.driver_version == "550.54.15"
    assert node.cuda_version == "12.4"
    assert node.kubelet_version == "v1.29.4"
    assert node.container_runtime == "containerd://1.7.13"
    assert node.os_image == "Ubuntu 22.04.4 LTS"
    assert node.kernel_version == "5.15.0-105-generic"
    assert node.os == "linux"
    assert node.cpus == 224
    assert node.memory_bytes == 2113371076 * 1024
    assert node.resources["rdma/rdma_shared_device_a"] == {"capacity": 63, "allocatable": 63}
    # A GPU-dedication taint keeps other pods off; the node still schedules GPU pods.
    assert node.taints == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert node.state == "ready" and node.ready and node.schedulable


def test_time_sliced_node_advertises_replicas_times_gpus(fleet):
    node = _by_name(parse_kubernetes(fleet))["a100-ts-01"]
    assert node.gpu_capacity == 32
    assert node.gpu_count_label == 8
    assert node.gpu_replicas == 4
    assert node.sharing_strategy == "time-slicing"
    assert node.gpu_product == "NVIDIA-A100-SXM4-40GB"  # "-SHARED" dropped
    assert node.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-SHARED"


def test_mig_mixed_node_keeps_mig_resources_beside_whole_gpus(fleet):
    node = _by_name(parse_kubernetes(fleet))["h100-mig-01"]
    assert node.gpu_capacity == 7
    assert node.mig_resources == {"1g.10gb": 7}
    assert node.resources["nvidia.com/mig-1g.10gb"] == {"capacity": 7, "allocatable": 7}
    assert node.mig_strategy == "mixed"
    assert node.mig_config == "custom-one-gpu-1g.10gb"
    assert node.mig_config_state == "success"
    assert node.mig_label_counts == {"1g.10gb": 7}
    assert node.gpu_count_label == 8


def test_notready_cordoned_node(fleet):
    node = _by_name(parse_kubernetes(fleet))["gpu-b02"]
    assert node.state == "notready"
    assert node.state_flags == ["cordoned"]
    assert not node.ready and not node.schedulable
    assert node.reason.startswith("KubeletNotReady: container runtime network not ready")
    assert {t["key"] for t in node.taints} == {
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/not-ready",
    }
    assert node.gpu_capacity == 4


def test_cpu_node_has_zero_gpus(fleet):
    node = _by_name(parse_kubernetes(fleet))["cpu-01"]
    assert (node.gpu_capacity, node.gpu_allocatable) == (0, 0)
    assert node.resources == {} and node.mig_resources == {}
    assert node.gpu_product is None and node.gpu_count_label is None


def test_shared_resource_alone_is_not_gpu_capacity(fleet):
    node = _by_name(parse_kubernetes(fleet))["l40s-mps-01"]
    assert node.gpu_capacity == 0
    assert node.resources == {"nvidia.com/gpu.shared": {"capacity": 8, "allocatable": 8}}
    assert node.sharing_strategy == "mps"


def test_a_single_node_object(fleet):
    snapshot = parse_kubernetes(fleet["items"][2])
    assert snapshot.format == "kubernetes-node"
    assert [n.name for n in snapshot.nodes] == ["h100-mig-01"]


def test_a_cordoned_node_that_is_ready_is_not_schedulable(fleet):
    item = copy.deepcopy(fleet["items"][0])
    item["spec"]["unschedulable"] = True
    node = parse_node(item)
    assert node.ready and not node.schedulable
    assert node.state_flags == ["cordoned"]


def test_unknown_ready_condition_and_no_conditions():
    node = parse_node(
        {
            "metadata": {"name": "n"},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]},
        }
    )
    assert node.state == "unknown" and not node.ready
    assert parse_node({"metadata": {"name": "m"}}).state == "unknown"


def test_real_gfd_labels_of_a_mig_mixed_h100():
    labels = json.loads(sample_text("k8s-node-labels-h100-mig-mixed-nvdocs.json"))
    facts = gfd_facts(labels)
    assert facts["gpu_product"] == "NVIDIA-H100-80GB-HBM3"
    assert facts["gpu_count_label"] == 1
    assert facts["gpu_memory_label_mib"] == 81559
    assert facts["mig_strategy"] == "mixed"
    assert facts["mig_config"] == "all-balanced"
    assert facts["mig_label_counts"] == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert facts["driver_version"] == "550.54.15"
    assert facts["cuda_version"] == "12.4"
    assert facts["gpu_replicas"] == 0

    node = parse_node(
        {
            "metadata": {"name": "s4124-0073", "labels": labels},
            "status": {
                "capacity": {
                    "nvidia.com/mig-1g.10gb": "2",
                    "nvidia.com/mig-2g.20gb": "1",
                    "nvidia.com/mig-3g.40gb": "1",
                },
            },
        }
    )
    assert node.hostname == "s4124-0073"  # from kubernetes.io/hostname
    assert node.gpu_capacity == 0  # mixed strategy: no whole GPU left
    assert node.mig_resources == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}


def test_yaml_output_reads_like_json(fleet):
    text = yaml.safe_dump(fleet)
    from clusters.parsers import parse_snapshot

    assert parse_snapshot(text).nodes == parse_kubernetes(fleet).nodes


@pytest.mark.parametrize(
    ("quantity", "value"),
    [("96", 96), ("7500m", 7.5), ("527422416Ki", 527422416 * 1024), ("1e3", 1000), ("2G", 2e9)],
)
def test_quantities(quantity, value):
    assert parse_quantity(quantity) == pytest.approx(value)


def test_kubectl_describe_snippet_from_nvidia_docs():
    snapshot = parse_describe(sample_text("k8s-describe-8gpu-7allocatable-snippet-nvdocs.txt"))
    assert snapshot.format == "kubernetes-describe"
    (node,) = snapshot.nodes
    assert node.name == "gpu-node-1"
    # The physical server has 8 GPUs; the device plugin advertises 7 (one unhealthy).
    assert (node.gpu_capacity, node.gpu_allocatable) == (7, 7)
    assert node.addresses == ["10.158.144.58", "gpu-node-1"]
    assert node.hostname == "gpu-node-1"
    assert node.cpus == 96
    assert node.memory_bytes == 527422416 * 1024
    # Conditions were elided by the doc writer: the state is unknown, not guessed.
    assert node.state == "unknown" and not node.ready


def test_full_describe_output_matches_the_node_object(fleet):
    described = _by_name(parse_describe(fixture_text("k8s-kubectl-describe-nodes.txt")))
    listed = _by_name(parse_kubernetes(fleet))

    dgx = described["dgx-h100-01"]
    for field in (
        "system_uuid",
        "machine_id",
        "addresses",
        "hostname",
        "gpu_capacity",
        "gpu_allocatable",
        "taints",
        "state",
        "ready",
        "schedulable",
        "kubelet_version",
        "kernel_version",
        "container_runtime",
        "os_image",
        "cpus",
        "memory_bytes",
        "gpu_product",
    ):
        assert getattr(dgx, field) == getattr(listed["dgx-h100-01"], field), field
    assert dgx.gpu_used == 6  # "Allocated resources": what pods request

    b02 = described["gpu-b02"]
    assert b02.state == "notready" and not b02.schedulable
    assert b02.state_flags == ["cordoned", "disk_pressure"]
    assert (b02.gpu_capacity, b02.gpu_allocatable, b02.gpu_used) == (4, 3, 0)
    assert b02.reason == "KubeletNotReady: container runtime network not ready: NetworkReady=false"


def test_pods_sum_gpu_requests_the_kubernetes_way():
    pods = {p.name: p for p in parse_pods(fixture_json("k8s-kubectl-get-pods-gpu.json"))}
    assert pods["train-llama-0"].gpu_requests == 4
    assert pods["eval-7f9c"].gpu_requests == 2  # limit only: the request equals it
    assert pods["serve-0"].gpu_requests == 3  # max(app 2 + sidecar 1, init 1 + sidecar 1)
    assert pods["notebook-ana"].mig_requests == {"1g.10gb": 1}
    assert pods["notebook-ana"].gpu_requests == 0
    assert pods["train-big-0"].node_name is None
    assert not pods["train-big-0"].holds_resources
    assert not pods["bench-done"].holds_resources
    assert pods["eval-7f9c"].holds_resources  # bound and pending


def test_gpu_used_by_node_counts_only_pods_that_hold_gpus():
    pods = parse_pods(fixture_json("k8s-kubectl-get-pods-gpu.json"))
    assert gpu_used_by_node(pods) == {"dgx-h100-01": 6, "a100-ts-01": 3}


def test_a_list_of_pods_is_not_a_node_snapshot():
    with pytest.raises(SnapshotFormatError, match="not Nodes"):
        parse_kubernetes(fixture_json("k8s-kubectl-get-pods-gpu.json"))


def test_a_node_list_is_not_a_pod_list(fleet):
    fleet["kind"] = "NodeList"
    with pytest.raises(SnapshotFormatError):
        parse_pods(fleet)


@pytest.mark.parametrize(
    "document",
    [
        {"kind": "List", "items": [{"kind": "Node", "metadata": {}}]},
        {"kind": "NodeList", "items": ["dgx"]},
        {"kind": "NodeList", "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "a"}}]},
        {"kind": "Deployment"},
    ],
)
def test_broken_node_lists_are_rejected(document):
    with pytest.raises(SnapshotFormatError):
        parse_kubernetes(document)
