"""The workloads rules over plain facts (no database)."""

from __future__ import annotations

from workloads.rules import (
    GpuNeed,
    HeldDevice,
    ProcessFact,
    WorkloadFacts,
    WorkloadRef,
    WrongPlace,
    evaluate,
    strip_replica,
)

MIB = 2**20
JOB = WorkloadRef(id=1, cluster_id=9, scheduler_id="5679", user="alice", account="research")
OTHER = WorkloadRef(id=2, cluster_id=9, scheduler_id="5680", user="bob")
ENDED = WorkloadRef(id=3, cluster_id=9, scheduler_id="5600", user="carol", state="completed")


def p(pid: int, gpu: int, workload: int | None = None, **kw) -> ProcessFact:
    fields = {
        "server_id": 7,
        "hostname": "dgx-07",
        "gpu_id": 100 + gpu,
        "gpu_index": gpu,
        "gpu_uuid": f"GPU-{gpu}",
        "device_uuid": f"GPU-{gpu}",
        "mig_device_id": None,
        "pid": pid,
        "used_memory_bytes": 512 * MIB,
        "workload_id": workload,
    }
    return ProcessFact(**{**fields, **kw})


def held(workload: int, *gpus: int, server: int = 7, **kw) -> tuple[HeldDevice, ...]:
    return tuple(
        HeldDevice(
            workload_id=workload,
            server_id=server,
            node_id=70,
            gpu_id=100 + g,
            uuid=f"GPU-{g}",
            hostname="dgx-07",
            gpu_index=g,
            **kw,
        )
        for g in gpus
    )


def facts(**kw) -> WorkloadFacts:
    return WorkloadFacts(workloads={1: JOB, 2: OTHER, 3: ENDED}, **kw)


def types(found) -> list[tuple[str, str]]:
    return sorted((t, s) for t, s in found)


def test_a_process_on_a_gpu_its_job_was_given_is_no_finding():
    assert evaluate(facts(processes=(p(1, 0, 1), p(2, 1, 1)), held=held(1, 0, 1))) == {}


def test_a_process_on_a_gpu_its_job_was_not_given_is_outside_its_allocation():
    found = evaluate(facts(processes=(p(1, 0, 1), p(2, 5, 1), p(3, 5, 1)), held=held(1, 0, 1)))
    assert types(found) == [("process_outside_allocation", "workload:1:server:7:device:GPU-5")]
    (fact,) = found.values()
    assert fact.severity == "warning"
    assert fact.gpu_id == 105 and fact.server_id == 7 and fact.cluster_id == 9
    assert fact.details["pids"] == [2, 3]
    assert fact.details["used_memory_bytes"] == 1024 * MIB
    assert fact.details["user"] == "alice" and fact.details["scheduler_id"] == "5679"
    assert fact.details["allocated_gpu_indexes"] == [0, 1]
    assert "dgx-07 GPU 5" in fact.message and "5679 of alice" in fact.message


def test_an_allocation_known_by_count_only_is_not_judged():
    counted = (HeldDevice(workload_id=1, server_id=7, node_id=70, gpu_id=None),)
    assert evaluate(facts(processes=(p(1, 5, 1),), held=counted)) == {}


def test_a_process_on_a_server_its_job_holds_nothing_on_is_outside_it():
    elsewhere = held(1, 0, server=8)
    found = evaluate(facts(processes=(p(1, 2, 1),), held=elsewhere))
    assert types(found) == [("process_outside_allocation", "workload:1:server:7:device:GPU-2")]
    assert "given no GPU of this server" in next(iter(found.values())).message


def test_a_mig_allocation_covers_only_its_own_mig_device():
    mig = (HeldDevice(workload_id=1, server_id=7, node_id=70, gpu_id=100, mig_device_id=11),)
    on_it = p(1, 0, 1, mig_device_id=11, device_uuid="MIG-a")
    beside = p(2, 0, 1, mig_device_id=12, device_uuid="MIG-b")
    found = evaluate(facts(processes=(on_it, beside), held=mig))
    assert types(found) == [("process_outside_allocation", "workload:1:server:7:device:MIG-b")]


def test_a_kubelet_device_id_covers_its_gpu():
    by_uuid = (HeldDevice(workload_id=1, server_id=7, node_id=70, gpu_id=None, uuid="GPU-4"),)
    assert evaluate(facts(processes=(p(1, 4, 1),), held=by_uuid)) == {}
    assert strip_replica("GPU-4::3") == "GPU-4"


def test_a_process_of_no_workload_on_a_free_gpu_is_a_warning_stray():
    found = evaluate(facts(processes=(p(40, 3, None, name="python"),)))
    assert types(found) == [("stray_gpu_process", "server:7:device:GPU-3")]
    (fact,) = found.values()
    assert fact.severity == "warning"
    assert fact.details["pids"] == [40]
    assert fact.details["processes"][0]["name"] == "python"
    assert "512 MiB" in fact.message and "free" in fact.message


def test_a_process_of_an_ended_job_on_another_jobs_gpu_is_a_critical_stray():
    found = evaluate(facts(processes=(p(40, 3, 3), p(41, 3, 2)), held=held(2, 3)))
    (fact,) = found.values()
    assert fact.type == "stray_gpu_process" and fact.severity == "critical"
    assert fact.details["pids"] == [40]
    assert [w["scheduler_id"] for w in fact.details["ended_workloads"]] == ["5600"]
    assert [w["user"] for w in fact.details["allocated_to"]] == ["bob"]


def test_a_critical_stray_is_about_its_gpu_never_the_whole_server():
    unknown_gpu = p(40, 3, 3, gpu_id=None)
    (fact,) = evaluate(facts(processes=(unknown_gpu,), held=held(2, 3))).values()
    assert (fact.severity, fact.gpu_id) == ("warning", None)


def test_a_process_whose_owner_cannot_be_seen_is_not_a_stray():
    unseen = p(40, 3, None, scheduler="kubernetes", pod_uid="u", owner_knowable=False)
    assert evaluate(facts(processes=(unseen,))) == {}


def test_a_running_workload_on_a_gpu_needing_action():
    need = GpuNeed(
        gpu_id=103,
        server_id=7,
        hostname="dgx-07",
        index=3,
        uuid="GPU-3",
        reason="health_finding",
        words="open health finding: Fatal Xid 79",
    )
    found = evaluate(facts(held=held(1, 2, 3) + held(3, 3), needing_action={103: need}))
    assert types(found) == [("workload_on_gpu_needing_action", "workload:1:gpu:103")]
    (fact,) = found.values()
    assert fact.details["reason_words"] == "open health finding: Fatal Xid 79"
    assert fact.details["user"] == "alice" and fact.details["gpu_index"] == 3
    assert "Xid 79" in fact.message


def test_a_workload_seen_only_by_its_processes_on_a_gpu_needing_action():
    need = GpuNeed(103, 7, "dgx-07", 3, "GPU-3", "lost_off_bus", "lost: fell off the bus")
    found = evaluate(facts(processes=(p(1, 3, 1),), needing_action={103: need}))
    assert ("workload_on_gpu_needing_action", "workload:1:gpu:103") in found


def test_a_running_workload_on_a_server_reconciliation_marks_wrong():
    wrong = WrongPlace(7, "dgx-07", (55,), ("dgx-07: Kubernetes advertises 4 GPUs, 8 found",))
    found = evaluate(facts(held=held(1, 0, 1) + held(3, 2), wrong_servers={7: wrong}))
    assert types(found) == [("workload_on_misreconciled_server", "workload:1:place:7")]
    (fact,) = found.values()
    assert fact.details["gpu_indexes"] == [0, 1] and fact.details["findings"] == [55]
    assert "advertises 4 GPUs" in fact.message


def test_an_unbound_node_marked_wrong_counts_too():
    wrong = WrongPlace(None, "gpu-b02", (56,), ("node without a server",))
    on_node = (HeldDevice(workload_id=1, server_id=None, node_id=70, gpu_id=None, gpu_index=0),)
    found = evaluate(facts(held=on_node, wrong_nodes={70: wrong}))
    assert types(found) == [("workload_on_misreconciled_server", "workload:1:place:-70")]
