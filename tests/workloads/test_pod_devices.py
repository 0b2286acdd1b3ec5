"""Issue 24: the kubelet's device IDs name the GPUs and MIG devices a pod group holds."""

from __future__ import annotations

from clusters.parsers import parse_pods
from tests.fixtures.scheduler import fixture_json
from tests.workloads.pods import k8s_pod, pod_list
from workloads.parsers.pods import pods_to_workloads
from workloads.pod_devices import (
    UnknownDevice,
    device_slot,
    join_pod_devices,
    snapshot_with_devices,
)
from workloads.records import GpuSlot

A = [f"GPU-a{i}000000-1111-2222-3333-444444444444" for i in range(8)]
B = [f"GPU-b{i}000000-1111-2222-3333-444444444444" for i in range(8)]
MIG = "MIG-5c3b1e1f-8d2a-5b4e-9c7d-0a1b2c3d4e5f"
MIG2 = "MIG-7e2a9c44-1b3d-5f6e-8a9b-c0d1e2f3a4b5"


def snapshot():
    return pods_to_workloads(parse_pods(fixture_json("k8s-kubectl-get-pods-workloads.json")))


def by_id(workloads):
    return {w.scheduler_id: w for w in workloads}


def test_device_ids_fill_the_slots_by_uuid():
    devices = {
        ("ml", "llama-ft-master-0"): [("nvidia.com/gpu", A[0]), ("nvidia.com/gpu", A[1])],
        ("ml", "llama-ft-worker-0"): [("nvidia.com/gpu", A[2]), ("nvidia.com/gpu", A[3])],
        ("ml", "llama-ft-worker-1"): [("nvidia.com/gpu", B[4]), ("nvidia.com/gpu", B[5])],
        ("ml", "llama-ft-worker-2"): [("nvidia.com/gpu", B[6]), ("nvidia.com/gpu", B[7])],
        ("ml", "llama-ft-worker-9"): [("nvidia.com/gpu", B[0])],  # no such pod in the group
    }
    joined, unknown = snapshot_with_devices(snapshot(), devices, {"dgx-a": set(A), "dgx-b": set(B)})
    job = by_id(joined.workloads)["ml/llama-ft"]
    assert unknown == ()
    slots = {a.node: [s.uuid for s in a.gpus] for a in job.allocations}
    assert slots == {"dgx-a": A[:4], "dgx-b": B[4:]}
    holders = [s.pod for s in job.allocations[0].gpus]
    assert holders == ["llama-ft-master-0"] * 2 + ["llama-ft-worker-0"] * 2
    assert {s.gpu_type for a in job.allocations for s in a.gpus} == {"nvidia.com/gpu"}
    assert (job.gpu_count, job.sharing) == (8, "")
    assert not any(s.shared for a in job.allocations for s in a.gpus)
    # Workloads whose pods the agents said nothing about keep their counts.
    assert by_id(joined.workloads)["serve/vllm"].allocations[0].gpus == ()


def test_mig_devices_carry_their_profile():
    devices = {
        ("research", "notebook-0"): [("nvidia.com/mig-1g.10gb", MIG)],
        ("research", "sweep-0-h2kx0"): [("nvidia.com/mig-3g.40gb", MIG2)],
    }
    joined, unknown = snapshot_with_devices(snapshot(), devices, {"h100-mig-01": {MIG, MIG2}})
    found = by_id(joined.workloads)
    assert found["research/notebook"].allocations[0].gpus == (
        GpuSlot(
            uuid=MIG, gpu_type="nvidia.com/mig-1g.10gb", mig_profile="1g.10gb", pod="notebook-0"
        ),
    )
    sweep = found["research/sweep"].allocations[0]
    assert [s.mig_profile for s in sweep.gpus] == ["3g.40gb"]
    assert sweep.gpu_count == 2  # one of two pods reported: the count stays
    assert unknown == ()


def test_a_time_sliced_replica_id_is_its_gpu_shared():
    assert device_slot("nvidia.com/gpu", f"{A[3]}::2") == GpuSlot(
        uuid=A[3], gpu_type="nvidia.com/gpu", shared=True
    )
    assert device_slot("nvidia.com/gpu.shared", A[3]).shared
    assert device_slot("nvidia.com/mig-1g.10gb.shared", f"{MIG}::0").mig_profile == "1g.10gb"
    pods = [
        k8s_pod(
            f"web-5c7f9d-{i}",
            node="ts-01",
            gpus=1,
            owner=("ReplicaSet", "web-5c7f9d"),
            labels={"pod-template-hash": "5c7f9d"},
        )
        for i in range(3)
    ]
    devices = {
        ("ml", "web-5c7f9d-0"): [("nvidia.com/gpu", f"{A[0]}::0")],
        ("ml", "web-5c7f9d-1"): [("nvidia.com/gpu", f"{A[0]}::1")],  # the same GPU
        ("ml", "web-5c7f9d-2"): [("nvidia.com/gpu", f"{A[1]}::0")],
    }
    joined = join_pod_devices(
        pods_to_workloads(parse_pods(pod_list(*pods))).workloads, devices, {"ts-01": A}
    )
    (web,) = joined.workloads
    (allocation,) = web.allocations
    assert [(s.uuid, s.shared, s.pod) for s in allocation.gpus] == [
        (A[0], True, "web-5c7f9d-0"),
        (A[1], True, "web-5c7f9d-2"),
    ]
    assert (allocation.gpu_count, web.sharing, joined.unknown) == (3, "time-slicing", ())
    workloads = pods_to_workloads(parse_pods(pod_list(*pods))).workloads
    mps = join_pod_devices(workloads, devices, node_sharing={"ts-01": "mps"})
    assert mps.workloads[0].sharing == "mps"  # the node's strategy, where known


def test_a_device_the_nodes_server_lacks_is_listed_not_invented():
    devices = {
        ("default", "debug-shell"): [
            ("nvidia.com/gpu", "GPU-deadbeef-0000-0000-0000-000000000000")
        ],
        ("ml", "prep-then-train"): [("nvidia.com/gpu", A[5].upper())],  # case differs: known
    }
    joined, unknown = snapshot_with_devices(snapshot(), devices, {"dgx-c": set(A)})
    assert unknown == (
        UnknownDevice(
            node="dgx-c",
            namespace="default",
            pod="debug-shell",
            resource="nvidia.com/gpu",
            device_id="GPU-deadbeef-0000-0000-0000-000000000000",
        ),
    )
    found = by_id(joined.workloads)
    assert found["default/debug-shell"].allocations[0].gpus == ()
    assert found["default/debug-shell"].allocations[0].gpu_count == 1
    assert [s.uuid for s in found["ml/prep-then-train"].allocations[0].gpus] == [A[5].upper()]


def test_a_node_without_a_known_server_is_not_checked():
    devices = {("default", "debug-shell"): [("nvidia.com/gpu", B[0])]}
    joined, unknown = snapshot_with_devices(snapshot(), devices, {"dgx-a": set(A)})
    assert unknown == ()
    assert by_id(joined.workloads)["default/debug-shell"].allocations[0].gpus[0].uuid == B[0]


def test_other_resources_and_index_ids():
    devices = {
        ("default", "debug-shell"): [
            ("rdma/rdma_shared_device_a", "mlx5_0"),
            ("nvidia.com/gpu", "3"),  # the device plugin's index strategy
            ("nvidia.com/gpu", ""),
        ]
    }
    joined, unknown = snapshot_with_devices(snapshot(), devices, {"dgx-c": set(A)})
    slots = by_id(joined.workloads)["default/debug-shell"].allocations[0].gpus
    assert slots == (GpuSlot(index=3, gpu_type="nvidia.com/gpu", pod="debug-shell"),)
    assert unknown == ()


def test_no_device_facts_change_nothing():
    plain = snapshot()
    joined, unknown = snapshot_with_devices(plain, {}, {"dgx-a": set(A)})
    assert (joined, unknown) == (plain, ())
