"""Applying workload listings: exact GPUs, history by serial, idempotence, refusals."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from inventory.models import Gpu
from tests.workloads.fleet import STARTED, job, listing, slurm_fleet
from workloads.models import Allocation, Workload
from workloads.records import WorkloadFormatError
from workloads.services.apply import record_digest, workloads_apply

pytestmark = pytest.mark.django_db


@pytest.fixture
def hpc():
    return slurm_fleet()


def _held(scheduler_id: str) -> list[tuple[str, int, int]]:
    rows = Allocation.objects.filter(workload__scheduler_id=scheduler_id, until__isnull=True)
    return sorted((a.node_name, a.index, a.gpu.index) for a in rows.select_related("gpu"))


def test_a_job_holds_exactly_the_gpus_slurm_gave_on_each_node(hpc):
    result = workloads_apply(
        cluster=hpc,
        snapshot=listing(
            job("5679", ("gpu-01", (0, 1, 2, 3)), ("gpu-02", (4, 5, 6, 7))),
            job("5680", ("gpu-01", (4, 5))),
        ),
    )
    assert (result.created, result.changed, result.allocations_opened) == (2, 0, 10)
    assert _held("5679") == [("gpu-01", i, i) for i in range(4)] + [
        ("gpu-02", i, i) for i in range(4, 8)
    ]
    workload = Workload.objects.get(scheduler_id="5679")
    assert (workload.node_count, workload.gpu_count, workload.gpu_models) == (
        2,
        8,
        ["NVIDIA H100 80GB HBM3"],
    )
    gpu = Gpu.objects.get(server__hostname="gpu-01", index=4)
    assert list(gpu.allocations.values_list("workload__scheduler_id", flat=True)) == ["5680"]
    assert all(a.gpu_serial == a.gpu.serial for a in Allocation.objects.select_related("gpu"))
    assert all(a.server_id == a.gpu.server_id for a in Allocation.objects.select_related("gpu"))


def test_the_same_listing_twice_changes_nothing(hpc):
    snapshot = listing(job("5679", ("gpu-01", (0, 1))))
    workloads_apply(cluster=hpc, snapshot=snapshot)
    before = list(Allocation.objects.values_list("id", "since", "until"))
    again = workloads_apply(cluster=hpc, snapshot=snapshot)
    assert (again.unchanged, again.changed, again.created, again.allocations_opened) == (1, 0, 0, 0)
    assert list(Allocation.objects.values_list("id", "since", "until")) == before


def test_a_job_that_ends_releases_its_gpus_and_keeps_them_as_history(hpc):
    workloads_apply(cluster=hpc, snapshot=listing(job("5679", ("gpu-01", (0, 1)))))
    ended = STARTED + timedelta(hours=2)
    result = workloads_apply(
        cluster=hpc,
        snapshot=listing(job("5679", ("gpu-01", (0, 1)), state="completed", ended_at=ended)),
    )
    assert (result.ended, result.allocations_closed) == (1, 2)
    workload = Workload.objects.get(scheduler_id="5679")
    assert (workload.state, workload.ended_at) == ("completed", ended)
    assert not Allocation.objects.filter(until__isnull=True).exists()
    gpu = Gpu.objects.get(server__hostname="gpu-01", index=0)
    past = Allocation.objects.filter(gpu_serial=gpu.serial)
    assert [a.workload.scheduler_id for a in past] == ["5679"]


def test_a_complete_listing_ends_the_running_jobs_it_no_longer_names(hpc):
    workloads_apply(
        cluster=hpc,
        snapshot=listing(job("1", ("gpu-01", (0,))), job("2", ("gpu-02", (0,)))),
    )
    result = workloads_apply(cluster=hpc, snapshot=listing(job("2", ("gpu-02", (0,)))))
    assert result.ended == 1
    gone = Workload.objects.get(scheduler_id="1")
    assert gone.ended_at is not None and gone.raw_state == "gone from the listing"
    assert _held("1") == [] and len(_held("2")) == 1


def test_a_single_job_answer_ends_nothing_else(hpc):
    workloads_apply(cluster=hpc, snapshot=listing(job("1", ("gpu-01", (0,)))))
    workloads_apply(cluster=hpc, snapshot=listing(job("2", ("gpu-02", (0,))), complete=False))
    assert len(_held("1")) == 1 and len(_held("2")) == 1


def test_moving_gpus_within_a_running_job_closes_the_old_and_opens_the_new(hpc):
    workloads_apply(cluster=hpc, snapshot=listing(job("7", ("gpu-01", (0, 1)))))
    result = workloads_apply(cluster=hpc, snapshot=listing(job("7", ("gpu-01", (1, 2)))))
    assert (result.allocations_opened, result.allocations_closed) == (1, 1)
    assert [i for _, i, _ in _held("7")] == [1, 2]


def test_a_gpu_index_the_node_lacks_is_refused_and_nothing_changes(hpc):
    workloads_apply(cluster=hpc, snapshot=listing(job("1", ("gpu-01", (0,)))))
    with pytest.raises(WorkloadFormatError) as caught:
        workloads_apply(
            cluster=hpc,
            snapshot=listing(job("2", ("gpu-01", (1,))), job("3", ("gpu-02", (9,)))),
        )
    assert caught.value.path == "workloads[1].allocations[0].gpus"
    assert "index 9" in caught.value.reason and "8 GPUs" in caught.value.reason
    assert list(Workload.objects.values_list("scheduler_id", flat=True)) == ["1"]


def test_pending_jobs_hold_nothing_and_accounting_never_invents_gpus(hpc):
    workloads_apply(
        cluster=hpc,
        snapshot=listing(job("9", state="pending"), job("5", ("gpu-01", (0,)))),
    )
    assert Workload.objects.get(scheduler_id="9").state == "pending"
    assert _held("9") == []
    # Accounting: the running job's history says "RUNNING" (ignored: the live view knows
    # better) and an old job with a GPU count but no indices holds nothing.
    old = job("3", state="completed", history_only=True, gpu_count=4, ended_at=timezone.now())
    workloads_apply(
        cluster=hpc,
        snapshot=listing(job("5", history_only=True), old, complete=False, history=True),
    )
    assert len(_held("5")) == 1
    assert Workload.objects.get(scheduler_id="3").gpu_count == 4
    assert not Allocation.objects.filter(workload__scheduler_id="3").exists()


def test_a_listing_costs_a_fixed_number_of_queries(hpc, django_assert_max_num_queries):
    few = listing(*(job(str(i), ("gpu-01", (i,))) for i in range(2)))
    many = listing(*(job(str(i), (("gpu-01", "gpu-02")[i % 2], (i // 2,))) for i in range(16)))
    with django_assert_max_num_queries(16) as small:
        workloads_apply(cluster=hpc, snapshot=few)
    Workload.objects.all().delete()
    with django_assert_max_num_queries(16) as large:
        workloads_apply(cluster=hpc, snapshot=many)
    assert len(large.captured_queries) == len(small.captured_queries)


def test_an_unchanged_listing_reads_no_gpu_rows(hpc):
    snapshot = listing(job("5679", ("gpu-01", (0, 1))), job("5680", ("gpu-02", (0,))))
    workloads_apply(cluster=hpc, snapshot=snapshot)
    with CaptureQueriesContext(connection) as ctx:
        again = workloads_apply(cluster=hpc, snapshot=snapshot)
    assert again.unchanged == 2
    assert not [q for q in ctx.captured_queries if "inventory_gpu" in q["sql"]]


def test_a_job_ended_without_its_nodes_keeps_its_gpu_models(hpc):
    workloads_apply(cluster=hpc, snapshot=listing(job("5679", ("gpu-01", (0, 1)))))
    workloads_apply(cluster=hpc, snapshot=listing(job("5679", state="completed"), complete=False))
    workload = Workload.objects.get(scheduler_id="5679")
    assert (workload.state, workload.gpu_models) == ("completed", ["NVIDIA H100 80GB HBM3"])
    assert _held("5679") == []


def test_a_job_first_seen_ended_leaves_its_gpus_as_history(hpc):
    ended = STARTED + timedelta(hours=1)
    workloads_apply(
        cluster=hpc,
        snapshot=listing(job("4", ("gpu-02", (6, 7)), state="completed", ended_at=ended)),
    )
    rows = Allocation.objects.filter(workload__scheduler_id="4").select_related("gpu")
    assert sorted((r.gpu.index, r.since, r.until) for r in rows) == [
        (6, STARTED, ended),
        (7, STARTED, ended),
    ]


def test_allocations_applied_before_their_node_was_bound_join_once_it_is(hpc):
    from clusters.models import Node
    from workloads.services.apply import allocations_join

    node = Node.objects.get(cluster=hpc, name="gpu-01")
    server = node.server
    Node.objects.filter(pk=node.pk).update(server=None)
    workloads_apply(cluster=hpc, snapshot=listing(job("8", ("gpu-01", (2, 3)))))
    assert not Allocation.objects.filter(gpu__isnull=False).exists()
    Node.objects.filter(pk=node.pk).update(server=server)
    assert allocations_join() == 2
    assert _held("8") == [("gpu-01", 2, 2), ("gpu-01", 3, 3)]
    assert Workload.objects.get(scheduler_id="8").gpu_models == ["NVIDIA H100 80GB HBM3"]
    assert allocations_join() == 0  # nothing left to join


def test_counted_gpus_are_replaced_one_for_one_when_the_devices_are_named(hpc):
    from workloads.records import GpuSlot, NodeAllocation, WorkloadRecord

    def pods(slots: tuple[GpuSlot, ...]) -> WorkloadRecord:
        return WorkloadRecord(
            kind="slurm_job",
            scheduler_id="p",
            state="running",
            started_at=STARTED,
            allocations=(NodeAllocation(node="gpu-01", gpu_count=4, gpus=slots),),
        )

    workloads_apply(cluster=hpc, snapshot=listing(pods(())))
    assert Allocation.objects.filter(until__isnull=True).count() == 4
    named = tuple(GpuSlot(index=i) for i in range(4))
    result = workloads_apply(cluster=hpc, snapshot=listing(pods(named)))
    assert (result.allocations_opened, result.allocations_closed) == (4, 4)
    assert _held("p") == [("gpu-01", i, i) for i in range(4)]


def _churn_pass_queries(cluster, jobs: int) -> tuple[int, int, tuple[int, ...]]:
    """Apply `jobs` one-GPU jobs over gpu-01 and gpu-02, then the same listing again, then one with
    a quarter of them changed each way (ended, moved to a free GPU, gone from the listing,
    new): the queries of the unchanged and of the churned pass, and what the churn did."""
    names = ("gpu-01", "gpu-02")
    first = [job(str(i), (names[i % 2], (i // 2,))) for i in range(jobs)]
    workloads_apply(cluster=cluster, snapshot=listing(*first))
    with CaptureQueriesContext(connection) as unchanged:
        again = workloads_apply(cluster=cluster, snapshot=listing(*first))
    assert again.unchanged == jobs
    quarter = jobs // 4
    churned = list(first[: jobs - quarter])  # the last quarter is gone from the listing
    for i in range(quarter):
        churned[i] = job(str(i), (names[i % 2], (i // 2,)), state="completed")
        j = quarter + i  # moved to a GPU of the upper half, free on both nodes
        churned[j] = job(str(j), (names[j % 2], (4 + j // 2 % 3,)))
    churned.append(job("new", ("gpu-01", (7,))))
    with CaptureQueriesContext(connection) as ctx:
        result = workloads_apply(cluster=cluster, snapshot=listing(*churned))
    Workload.objects.filter(cluster=cluster).delete()
    shape = (result.created, result.changed, result.ended, result.allocations_closed)
    return len(unchanged.captured_queries), len(ctx.captured_queries), shape


def test_an_unchanged_and_a_churned_listing_cost_the_same_queries_at_any_size(hpc):
    """The steady state of a listing applied every 30 s: the queries of the pass do not grow
    with the jobs it names, nor with the jobs that changed, ended or went."""
    small = _churn_pass_queries(hpc, 4)
    large = _churn_pass_queries(hpc, 8)
    assert small[2] == (1, 2, 2, 3) and large[2] == (1, 4, 4, 6)
    assert small[:2] == large[:2]
    assert small[0] <= 6  # the unchanged pass: nodes, stored digests, the join probe


def test_the_digest_is_canonical_json_for_every_shape_of_record():
    """Pods with device IDs, MIG and shared slots, nested `requested` words, times and an
    enum kind: the digest is still the hash of `asdict`'s canonical JSON."""
    from workloads.choices import WorkloadKind
    from workloads.records import GpuSlot, NodeAllocation, WorkloadRecord

    record = WorkloadRecord(
        kind=WorkloadKind.PODS,
        scheduler_id="ml/trainer",
        state="running",
        name='tr\u00e4iner "x"',
        submitted_at=timezone.now(),
        gpus_per_node=None,
        requested={"limits": {"nvidia.com/gpu": 2, "ratio": 0.5}, "z": [1, (2, 3)], "a": None},
        allocations=(
            NodeAllocation(
                node="gpu-01",
                gpu_count=3,
                gpus=(
                    GpuSlot(uuid="GPU-1::2", shared=True, pod="p-0"),
                    GpuSlot(uuid="MIG-9", mig_profile="1g.10gb"),
                    GpuSlot(index=3, gpu_type="h100"),
                ),
                cpus="0-15",
                pods=("p-0", "p-1"),
            ),
        ),
        owner_kind="Job",
    )
    canonical = json.dumps(record.to_dict(), sort_keys=True, default=str, separators=(",", ":"))
    assert record_digest(record) == hashlib.sha256(canonical.encode()).hexdigest()
