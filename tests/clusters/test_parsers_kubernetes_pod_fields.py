"""Issue 24: a pod record carries what grouping pods into workloads needs (owner, labels,
times, why it ended), and the GPU counts per node stay what they were."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

from clusters.parsers import gpu_used_by_node, parse_pods
from tests.fixtures.scheduler import fixture_json

PODS = fixture_json("k8s-kubectl-get-pods-workloads.json")


def by_name(document=PODS):
    return {p.name: p for p in parse_pods(copy.deepcopy(document))}


def test_the_controller_owner_labels_and_times_are_read():
    pod = by_name()["llama-ft-worker-1"]
    assert (pod.owner_kind, pod.owner_name) == ("PyTorchJob", "llama-ft")
    assert pod.uid and pod.uid == PODS["items"][2]["metadata"]["uid"]
    assert pod.labels["training.kubeflow.org/job-name"] == "llama-ft"
    assert pod.labels["user"] == "alice"
    # Only the keys grouping needs: the operator's bookkeeping labels are dropped.
    assert "training.kubeflow.org/operator-name" not in pod.labels
    assert pod.start_time == datetime(2026, 11, 30, 8, 0, 7, tzinfo=UTC)
    assert pod.created_at == datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    assert pod.containers == ("pytorch",)
    assert pod.gpu_containers == {"pytorch": {"nvidia.com/gpu": 2}}


def test_why_a_pod_ended_is_read():
    pods = by_name()
    assert pods["tokenize-8fj2k"].terminated_reasons == ("OOMKilled",)
    assert (pods["old-train"].phase, pods["old-train"].reason) == ("Failed", "Evicted")
    assert pods["eval-nightly-0-zz0"].terminated_reasons == ("Completed",)


def test_init_and_sidecar_containers_name_their_gpus_apart_from_the_app_containers():
    pod = by_name()["prep-then-train"]
    assert pod.containers == ("train",)
    assert pod.gpu_containers == {"warmup": {"nvidia.com/gpu": 4}, "train": {"nvidia.com/gpu": 2}}
    assert pod.gpu_requests == 4  # the init container's peak, as before


def test_mig_requests_per_container_and_the_priority_class():
    pods = by_name()
    assert pods["notebook-0"].gpu_containers == {"jupyter": {"nvidia.com/mig-1g.10gb": 1}}
    assert pods["vllm-6d9f7c8b5-x7k2p"].priority_class == "inference"
    assert pods["coredns-5d78c9869d-4xk8z"].gpu_containers == {}


def test_without_a_controller_flag_the_first_owner_is_taken():
    document = copy.deepcopy(PODS)
    item = document["items"][0]
    item["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Workflow", "name": "wf-1", "uid": "u1"},
        {"apiVersion": "v1", "kind": "PyTorchJob", "name": "wf-1-train", "uid": "u2"},
    ]
    pod = by_name(document)[item["metadata"]["name"]]
    assert (pod.owner_kind, pod.owner_name) == ("Workflow", "wf-1")
    item["metadata"]["ownerReferences"][1]["controller"] = True
    pod = by_name(document)[item["metadata"]["name"]]
    assert (pod.owner_kind, pod.owner_name) == ("PyTorchJob", "wf-1-train")


def test_a_time_without_a_zone_is_utc_and_no_owner_is_a_lone_pod():
    document = copy.deepcopy(PODS)
    item = next(i for i in document["items"] if i["metadata"]["name"] == "debug-shell")
    item["status"]["startTime"] = "2026-11-30T10:00:00"
    pod = by_name(document)["debug-shell"]
    assert pod.start_time == datetime(2026, 11, 30, 10, tzinfo=UTC)
    assert (pod.owner_kind, pod.owner_name) == ("", "")


def test_gpu_used_per_node_is_unchanged_by_the_new_fields():
    used = gpu_used_by_node(parse_pods(copy.deepcopy(PODS)))
    # dgx-a: PyTorchJob 2 x 2 and the DaemonSet's 1; finished and evicted pods hold none.
    assert used["dgx-a"] == 5
    assert used["dgx-b"] == 4 + 1  # two PyTorchJob pods, one vllm replica
    assert "cpu-01" not in used
