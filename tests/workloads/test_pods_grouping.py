"""Issue 24: Kubernetes pods that request GPUs become workloads, one per owner."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from clusters.parsers import parse_pods
from tests.fixtures.scheduler import fixture_json
from tests.workloads.pods import k8s_pod, pod_list
from workloads.parsers.pods import pods_to_workloads
from workloads.records import WorkloadRecord

FIXTURE = "k8s-kubectl-get-pods-workloads.json"


def workloads(document) -> dict[str, WorkloadRecord]:
    snapshot = pods_to_workloads(parse_pods(document))
    assert (snapshot.scheduler, snapshot.format, snapshot.complete) == (
        "kubernetes",
        "kubernetes-pods",
        True,
    )
    return {w.scheduler_id: w for w in snapshot.workloads}


@pytest.fixture(scope="module")
def listed() -> dict[str, WorkloadRecord]:
    return workloads(fixture_json(FIXTURE))


def per_node(workload: WorkloadRecord) -> dict[str, tuple[int, tuple[str, ...]]]:
    return {a.node: (a.gpu_count, a.pods) for a in workload.allocations}


def test_a_pytorchjob_of_four_pods_on_two_nodes_is_one_workload(listed):
    job = listed["ml/llama-ft"]
    assert (job.kind, job.owner_kind, job.name, job.account) == (
        "pods",
        "PyTorchJob",
        "llama-ft",
        "ml",
    )
    assert (job.state, job.node_count, job.gpu_count) == ("running", 2, 8)
    assert per_node(job) == {
        "dgx-a": (4, ("llama-ft-master-0", "llama-ft-worker-0")),
        "dgx-b": (4, ("llama-ft-worker-1", "llama-ft-worker-2")),
    }
    assert all(a.gpus == () for a in job.allocations)  # counts only, until devices join
    uids = job.requested.pop("pod_uids")
    assert job.requested == {"gpus_per_pod": 2, "pods": 4, "resources": {"nvidia.com/gpu": 8}}
    assert len(uids) == 4 and all(len(uid) == 36 for uid in uids)
    assert (job.user, job.partition) == ("alice", "team-a")
    assert job.started_at == datetime(2026, 11, 30, 8, 0, 5, tzinfo=UTC)  # the earliest pod
    assert job.submitted_at == datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    assert job.holds_gpus


def test_a_deployments_replicas_are_one_workload_named_without_the_template_hash(listed):
    deployment = listed["serve/vllm"]
    assert (deployment.owner_kind, deployment.name, deployment.gpu_count) == (
        "Deployment",
        "vllm",
        3,
    )
    assert per_node(deployment) == {
        "dgx-b": (1, ("vllm-6d9f7c8b5-b5n8w",)),
        "dgx-c": (2, ("vllm-6d9f7c8b5-q9m4t", "vllm-6d9f7c8b5-x7k2p")),
    }
    assert deployment.user == "bob"  # app.kubernetes.io/created-by
    assert deployment.partition == "inference"  # the priority class, without a queue


def test_a_lone_pod_is_its_own_workload(listed):
    pod = listed["default/debug-shell"]
    assert (pod.owner_kind, pod.name, pod.state, pod.gpu_count) == (
        "Pod",
        "debug-shell",
        "running",
        1,
    )
    assert (pod.user, pod.partition) == ("", "")


def test_cpu_only_pods_are_no_workloads(listed):
    assert not [w for w in listed if w.startswith("kube-system/")]
    # The MPIJob's launcher asks for no GPU: only its workers are the workload's pods.
    mpi = listed["hpc/nccl-tests"]
    assert (mpi.owner_kind, mpi.gpu_count, mpi.requested["pods"]) == ("MPIJob", 16, 2)
    assert all("launcher" not in p for a in mpi.allocations for p in a.pods)


def test_owners_above_the_pods_controller_are_the_workload(listed):
    jobset = listed["ml/pretrain"]  # two child Jobs, one pod each
    assert (jobset.owner_kind, jobset.node_count, jobset.gpu_count) == ("JobSet", 2, 16)
    assert jobset.partition == "training-high"
    lws = listed["serve/llama-405b"]  # a leader and a worker StatefulSet
    assert (lws.owner_kind, sorted(per_node(lws))) == ("LeaderWorkerSet", ["dgx-f", "dgx-g"])
    assert listed["research/notebook"].owner_kind == "StatefulSet"
    assert listed["monitoring/gpu-burn-check"].owner_kind == "DaemonSet"
    volcano = listed["vc/vc-train"]
    assert (volcano.owner_kind, volcano.node_count, volcano.gpu_count) == ("Job", 2, 8)


def test_mig_pods_count_their_mig_devices(listed):
    notebook = listed["research/notebook"]
    assert notebook.gpu_count == 1
    assert notebook.requested["resources"] == {"nvidia.com/mig-1g.10gb": 1}
    sweep = listed["research/sweep"]
    assert per_node(sweep) == {"h100-mig-01": (2, ("sweep-0-h2kx0", "sweep-1-h2kx1"))}
    assert {k: v for k, v in sweep.requested.items() if k != "pod_uids"} == {
        "gpus_per_pod": 1,
        "pods": 2,
        "resources": {"nvidia.com/mig-3g.40gb": 2},
    }


def test_an_init_container_that_asks_for_more_sets_the_pods_gpus(listed):
    # warmup's 4 GPUs outweigh train's 2; the sidecar asks for none.
    assert listed["ml/prep-then-train"].gpu_count == 4


def test_finished_and_waiting_pod_groups(listed):
    done = listed["ml/eval-nightly"]
    assert (done.state, done.raw_state) == ("completed", "Succeeded:2")
    assert per_node(done) == {"dgx-d": (2, ("eval-nightly-0-zz0", "eval-nightly-1-zz1"))}
    assert not done.holds_gpus  # where it ran, for history; it holds nothing now
    assert done.ended_at == datetime(2026, 11, 30, 9, 0, tzinfo=UTC)  # its last container
    assert listed["ml/llama-ft"].ended_at is None
    assert listed["ml/tokenize"].state == "out_of_memory"
    assert listed["ml/tokenize"].ended_at == datetime(2026, 11, 30, 8, 30, tzinfo=UTC)
    assert listed["ml/old-train"].state == "preempted"  # evicted
    queued = listed["ml/queued"]
    assert (queued.state, queued.allocations, queued.gpu_count) == ("pending", (), 4)
    assert (queued.partition, queued.started_at) == ("team-b", None)


def test_every_gpu_pod_of_the_fixture_is_in_exactly_one_workload(listed):
    document = fixture_json(FIXTURE)
    gpu_pods = {
        item["metadata"]["name"]
        for item in document["items"]
        if any(
            k.startswith("nvidia.com/")
            for c in item["spec"]["containers"] + item["spec"].get("initContainers", [])
            for k in c["resources"].get("limits", {}) | c["resources"].get("requests", {})
        )
    }
    grouped = [p for w in listed.values() for a in w.allocations for p in a.pods]
    assert sorted(grouped) == sorted(gpu_pods - {"queued-0-p8x2q"})  # unbound: no node


RS = ("ReplicaSet", "web-5c7f9d")


@pytest.mark.parametrize(
    ("phases", "state"),
    [
        ([("Running", None, None), ("Pending", None, None)], "running"),
        ([("Pending", None, None), ("Pending", None, None)], "pending"),
        ([("Succeeded", None, None), ("Succeeded", None, None)], "completed"),
        ([("Succeeded", None, None), ("Failed", None, None)], "failed"),
        ([("Failed", None, None), ("Running", None, None)], "running"),
        ([("Failed", "Evicted", None)], "preempted"),
        ([("Failed", None, "OOMKilled"), ("Failed", None, None)], "out_of_memory"),
        ([("Unknown", None, None), ("Succeeded", None, None)], "unknown"),
        ([("Pending", None, None), ("Succeeded", None, None)], "pending"),
    ],
)
def test_a_groups_state_comes_from_its_pods_phases(phases, state):
    pods = [
        k8s_pod(
            f"web-5c7f9d-{i}",
            gpus=1,
            owner=RS,
            phase=phase,
            reason=reason,
            terminated=term,
            labels={"pod-template-hash": "5c7f9d"},
        )
        for i, (phase, reason, term) in enumerate(phases)
    ]
    (workload,) = workloads(pod_list(*pods)).values()
    assert (workload.scheduler_id, workload.state) == ("ml/web", state)


def test_a_finished_pod_beside_live_ones_holds_no_gpus():
    pods = [
        k8s_pod(
            "web-5c7f9d-a", gpus=2, owner=RS, node="n1", labels={"pod-template-hash": "5c7f9d"}
        ),
        k8s_pod(
            "web-5c7f9d-b",
            gpus=2,
            owner=RS,
            node="n2",
            phase="Failed",
            reason="Evicted",
            labels={"pod-template-hash": "5c7f9d"},
        ),
    ]
    (workload,) = workloads(pod_list(*pods)).values()
    assert (workload.state, workload.gpu_count) == ("running", 2)
    assert per_node(workload) == {"n1": (2, ("web-5c7f9d-a",))}


def test_a_replicaset_without_the_hash_label_stays_a_replicaset():
    (workload,) = workloads(pod_list(k8s_pod("rs-x", gpus=1, owner=("ReplicaSet", "rs")))).values()
    assert (workload.scheduler_id, workload.owner_kind) == ("ml/rs", "ReplicaSet")


def test_a_kubeflow_label_groups_pods_without_an_owner_reference():
    label = {"training.kubeflow.org/job-name": "tf-mnist"}
    pods = [k8s_pod(f"tf-mnist-worker-{i}", gpus=1, labels=label) for i in range(3)]
    (workload,) = workloads(pod_list(*pods)).values()
    assert (workload.scheduler_id, workload.requested["pods"]) == ("ml/tf-mnist", 3)


def test_a_mirror_pod_owned_by_its_node_is_a_lone_pod():
    pod = k8s_pod("static-burn-dgx-a", gpus=1, owner=("Node", "dgx-a"))
    (workload,) = workloads(pod_list(pod)).values()
    assert (workload.scheduler_id, workload.owner_kind) == ("ml/static-burn-dgx-a", "Pod")


def test_two_owners_of_one_name_in_a_namespace_stay_two_workloads():
    pods = [
        k8s_pod("web-0", gpus=1, owner=("StatefulSet", "web")),
        k8s_pod("web-5c7f9d-a", gpus=1, owner=RS, labels={"pod-template-hash": "5c7f9d"}),
    ]
    found = workloads(pod_list(*pods))
    assert set(found) == {"ml/web", "ml/StatefulSet/web"}
    assert found["ml/web"].owner_kind == "Deployment"


def test_pods_of_one_owner_name_in_two_namespaces_are_two_workloads():
    pods = [k8s_pod("a-0", namespace=ns, gpus=1, owner=("StatefulSet", "a")) for ns in ("x", "y")]
    assert set(workloads(pod_list(*pods))) == {"x/a", "y/a"}


def test_no_gpu_pods_is_an_empty_complete_snapshot():
    snapshot = pods_to_workloads(parse_pods(pod_list(k8s_pod("cpu", gpus=0))))
    assert (snapshot.workloads, snapshot.complete) == ((), True)
