"""Real Slurm jobs (Debian's 22.05, four ``Gres=gpu:h100:8`` nodes) through the snapshot API.

Jobs are submitted with ``--gres=gpu:h100:N`` on one and on two nodes, as an array and as
one that ends at once; ``scontrol show job -d`` and slurmrestd's ``/slurm/v0.0.38/jobs``
are posted to ``POST /api/v1/clusters/{name}/snapshots/``. The Allocation rows must hold
exactly the nodes Slurm placed each job on (``squeue %N``) and indices no other job holds
there, both sources must agree row for row, and a job cancelled (or one that ended) must
come out of the next listing ended, its GPUs given back.
"""

from __future__ import annotations

import json
import time

import pytest
from rest_framework.test import APIClient

from clusters.parsers.slurm_common import expand_hostlist
from clusters.pull.slurmrestd import fetch_jobs

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]

CLUSTER = "live-jobs"


def _post(client, body, content_type, capture) -> dict:
    with capture(execute=True):
        response = client.generic(
            "POST", f"/api/v1/clusters/{CLUSTER}/snapshots/", body, content_type=content_type
        )
    assert response.status_code in (200, 201, 202), response.content
    return response.json()


def _sbatch(cluster, *args: str) -> str:
    out = cluster.run(
        cluster.sbatch,
        "--parsable",
        "--output=/dev/null",
        f"--chdir={cluster.root}",
        "--time=3",
        *args,
    )
    return out.strip().split(";")[0]


def _wait(what, predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _squeue(cluster) -> dict[str, tuple[str, list[str]]]:
    """{job id as squeue prints it (5_1 for an array task): (state, nodes)} of live jobs."""
    out = cluster.run(cluster.squeue, "-h", "-r", "-o", "%i|%T|%N", check=False)
    jobs = {}
    for line in out.splitlines():
        job_id, state, nodes = line.split("|")
        jobs[job_id] = (state, expand_hostlist(nodes) if nodes else [])
    return jobs


def _open_allocations(scheduler_id: str) -> dict[str, list[int]]:
    from workloads.models import Allocation

    held: dict[str, list[int]] = {}
    for row in Allocation.objects.filter(
        workload__cluster__name=CLUSTER, workload__scheduler_id=scheduler_id, until__isnull=True
    ).order_by("node_name", "index"):
        held.setdefault(row.node_name, []).append(row.index)
    return held


def test_real_jobs_hold_exactly_the_nodes_and_gpus_slurm_gave_then_end(
    slurm_cluster, staff, django_capture_on_commit_callbacks
):
    from workloads.models import Allocation, Workload

    cluster = slurm_cluster
    client = APIClient()
    client.force_authenticate(staff)
    capture = django_capture_on_commit_callbacks
    _post(client, cluster.run(cluster.scontrol, "show", "node", "-d"), "text/plain", capture)
    quick = _sbatch(cluster, "--job-name=quick", "--gres=gpu:h100:1", "--wrap", "true")
    try:
        _wait("the quick job to end", lambda: quick not in _squeue(cluster))
        three = _sbatch(cluster, "-N1", "--gres=gpu:h100:3", "--wrap", "sleep 120")
        wide = _sbatch(cluster, "-N2", "--gres=gpu:h100:8", "--wrap", "sleep 120")
        array = _sbatch(cluster, "--array=1-3", "--gres=gpu:h100:1", "--wrap", "sleep 120")
        tasks = [f"{array}_{i}" for i in (1, 2, 3)]
        expected = [three, wide, *tasks]

        def all_running() -> bool:
            live = _squeue(cluster)
            return all(live.get(j, ("",))[0] == "RUNNING" for j in expected)

        _wait("every job running", all_running)
        placed = {job: nodes for job, (_state, nodes) in _squeue(cluster).items()}

        text = cluster.run(cluster.scontrol, "show", "job", "-d")
        answer = _post(client, text, "text/plain", capture)
        assert answer["format"] == "slurm-scontrol-jobs-text"

        held = {job: _open_allocations(job) for job in expected}
        for job in expected:
            assert sorted(held[job]) == sorted(placed[job]), job
        assert [len(v) for v in held[three].values()] == [3]
        assert list(held[wide].values()) == [list(range(8)), list(range(8))]
        assert all([len(v) for v in held[t].values()] == [1] for t in tasks)
        by_node: dict[str, list[int]] = {}
        for job in expected:
            for node, indices in held[job].items():
                assert all(0 <= i < cluster.gpus_per_node for i in indices)
                by_node.setdefault(node, []).extend(indices)
        assert all(len(v) == len(set(v)) for v in by_node.values())  # no GPU held twice
        rows = {w.scheduler_id: w for w in Workload.objects.filter(cluster__name=CLUSTER)}
        assert (rows[wide].node_count, rows[wide].gpu_count, rows[wide].state) == (2, 16, "running")
        assert rows[quick].state == "completed" and rows[quick].ended_at is not None
        assert not _open_allocations(quick)

        # The same jobs through slurmrestd: the rows stay exactly as they are.
        before = sorted(
            Allocation.objects.filter(until__isnull=True).values_list("id", "node_name", "index")
        )
        document = fetch_jobs(cluster.restd_url, cluster.token, user=cluster.user, timeout=10)

        answer = _post(client, json.dumps(document), "application/json", capture)
        assert answer["format"] == "slurm-jobs-json"
        after = sorted(
            Allocation.objects.filter(until__isnull=True).values_list("id", "node_name", "index")
        )
        assert after == before

        cluster.run(cluster.scancel, three)
        _wait("the cancelled job to leave the queue", lambda: three not in _squeue(cluster))
        _post(client, cluster.run(cluster.scontrol, "show", "job", "-d"), "text/plain", capture)
        ended = Workload.objects.get(cluster__name=CLUSTER, scheduler_id=three)
        assert ended.state == "cancelled" and ended.ended_at is not None
        assert not _open_allocations(three)
        assert Allocation.objects.filter(workload=ended, until__isnull=False).count() == 3
        assert _open_allocations(wide) == held[wide]
    finally:
        cluster.cancel_all_jobs()
