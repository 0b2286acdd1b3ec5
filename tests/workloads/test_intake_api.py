"""Jobs listings and pod lists posted to the snapshot endpoint, as a cron job posts them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from clusters.models import Node
from tests.nodes import scontrol_node, scontrol_text
from tests.workloads.fleet import slurm_fleet
from workloads.models import Allocation, Workload

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LOCAL = FIXTURES / "workloads"


@pytest.fixture
def pusher(staff):
    client = APIClient()
    client.force_authenticate(staff)
    return client


def _post(client, name: str, body: str | bytes, content_type: str = "text/plain"):
    return client.generic(
        "POST", f"/api/v1/clusters/{name}/snapshots/", body, content_type=content_type
    )


def _local_cluster(client) -> None:
    nodes = [scontrol_node(f"gpu-node{i}", gres="gpu:h100:8") for i in range(1, 5)]
    assert _post(client, "atlasci", scontrol_text(*nodes)).status_code == 201


def _open(scheduler_id: str) -> dict[str, list[int]]:
    held: dict[str, list[int]] = {}
    rows = Allocation.objects.filter(workload__scheduler_id=scheduler_id, until__isnull=True)
    for row in rows.order_by("node_name", "index"):
        held.setdefault(row.node_name, []).append(row.index)
    return held


def test_real_scontrol_job_text_sets_the_workloads_and_never_the_node_set(pusher):
    _local_cluster(pusher)
    nodes_before = list(Node.objects.values_list("name", "gone_at"))
    text = (LOCAL / "slurm-local-2205-running-scontrol-show-job-d.txt").read_text()
    response = _post(pusher, "atlasci", text)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["kind"] == "slurm" and body["workloads"]["created"] == Workload.objects.count()
    assert list(Node.objects.values_list("name", "gone_at")) == nodes_before
    running = Workload.objects.filter(state="running")
    assert running.exists()
    for workload in running:
        held = _open(workload.scheduler_id)
        assert sum(len(v) for v in held.values()) == workload.gpu_count
    # The same listing from slurmrestd gives the same allocations, row for row.
    before = sorted(Allocation.objects.values_list("workload__scheduler_id", "node_name", "index"))
    restd = (LOCAL / "slurm-local-2205-running-slurmrestd-v0.0.38-jobs.json").read_bytes()
    assert _post(pusher, "atlasci", restd, "application/json").status_code == 201
    after = sorted(
        Allocation.objects.filter(until__isnull=True).values_list(
            "workload__scheduler_id", "node_name", "index"
        )
    )
    assert after == sorted(b for b in before)


def test_a_cancelled_job_comes_out_of_the_next_listing_ended(pusher):
    _local_cluster(pusher)
    _post(
        pusher,
        "atlasci",
        (LOCAL / "slurm-local-2205-running-squeue.json").read_bytes(),
        "application/json",
    )
    held = set(Allocation.objects.filter(until__isnull=True).values_list("workload_id", flat=True))
    after = (LOCAL / "slurm-local-2205-after-cancel-squeue.json").read_bytes()
    assert _post(pusher, "atlasci", after, "application/json").status_code == 201
    ended = Workload.objects.filter(id__in=held, ended_at__isnull=False)
    assert ended.exists()
    assert not Allocation.objects.filter(workload__in=ended, until__isnull=True).exists()


def test_jobs_before_the_node_list_are_refused(pusher):
    text = (LOCAL / "slurm-local-2205-running-scontrol-show-job-d.txt").read_text()
    response = _post(pusher, "nowhere", text)
    assert response.status_code == 400
    assert "before its workloads" in json.dumps(response.json())
    assert not Workload.objects.exists()


def test_gpu_indices_outside_the_node_are_a_field_level_400_and_change_nothing(pusher):
    nodes = [scontrol_node(f"gpu-node{i}", gres="gpu:h100:2") for i in range(1, 5)]
    assert _post(pusher, "atlasci", scontrol_text(*nodes)).status_code == 201
    text = (LOCAL / "slurm-local-2205-running-scontrol-show-job-d.txt").read_text()
    response = _post(pusher, "atlasci", text)
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    (path,) = errors
    assert path.startswith("workloads[") and "GPU index" in errors[path][0]
    assert not Workload.objects.exists()


def test_a_listing_cut_short_is_refused_and_changes_nothing(pusher):
    _local_cluster(pusher)
    whole = (LOCAL / "slurm-local-2205-running-slurmrestd-v0.0.38-jobs.json").read_bytes()
    assert _post(pusher, "atlasci", whole[: len(whole) // 2], "application/json").status_code == 400
    text = (LOCAL / "slurm-local-2205-running-scontrol-show-job-d.txt").read_text()
    third = text.index("JobId=3")
    cut = text[: third + text[third:].index("NumNodes=")]  # the third record cut mid-way
    assert _post(pusher, "atlasci", cut).status_code == 400
    assert not Workload.objects.exists()


def test_a_pod_list_sets_gpus_in_use_and_the_pod_groups_together(
    pusher, django_capture_on_commit_callbacks
):
    from tests.nodes import k8s_node, k8s_node_list

    nodes = k8s_node_list(*(k8s_node(f"dgx-{i}") for i in (1, 2)))
    assert _post(pusher, "k8s", nodes, "application/json").status_code == 201
    pods = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "kind": "Pod",
                "metadata": {
                    "name": f"train-worker-{i}",
                    "namespace": "ml",
                    "uid": f"00000000-0000-0000-0000-00000000000{i}",
                    "ownerReferences": [
                        {"kind": "PyTorchJob", "name": "train", "controller": True, "uid": "x"}
                    ],
                },
                "spec": {
                    "nodeName": f"dgx-{i}",
                    "containers": [
                        {"name": "main", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
                    ],
                },
                "status": {"phase": "Running", "startTime": "2026-12-01T10:00:00Z"},
            }
            for i in (1, 2)
        ],
    }
    response = _post(pusher, "k8s", json.dumps(pods), "application/json")
    assert response.status_code == 201, response.content
    assert dict(Node.objects.values_list("name", "gpu_used")) == {"dgx-1": 8, "dgx-2": 8}
    (workload,) = Workload.objects.all()
    assert (workload.scheduler_id, workload.kind, workload.node_count, workload.gpu_count) == (
        "ml/train",
        "pods",
        2,
        16,
    )
    assert Allocation.objects.filter(workload=workload, until__isnull=True).count() == 16


def test_import_snapshot_takes_jobs_listings(tmp_path):
    from django.core.management import call_command

    slurm_fleet(("gpu-node1", "gpu-node2", "gpu-node3", "gpu-node4"))
    from io import StringIO

    out = StringIO()
    call_command(
        "import_snapshot", "hpc", str(LOCAL / "slurm-local-2205-running-squeue.json"), stdout=out
    )
    assert "workloads" in out.getvalue()
    assert Allocation.objects.filter(until__isnull=True, gpu__isnull=False).exists()


def test_a_pod_list_too_large_to_apply_now_still_gives_its_pod_groups(pusher, settings):
    from tests.nodes import k8s_node, k8s_node_list

    nodes = k8s_node_list(k8s_node("dgx-1"))
    assert _post(pusher, "k8s", nodes, "application/json").status_code == 201
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "nb",
            "namespace": "ml",
            "uid": "00000000-0000-0000-0000-0000000000aa",
        },
        "spec": {
            "nodeName": "dgx-1",
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
        },
        "status": {"phase": "Running", "startTime": "2026-12-01T10:00:00Z"},
    }
    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 64  # the list waits for a worker
    response = _post(
        pusher, "k8s", json.dumps({"kind": "List", "items": [pod]}), "application/json"
    )
    assert response.status_code == 202, response.content
    (workload,) = Workload.objects.all()
    assert (workload.scheduler_id, workload.gpu_count) == ("ml/nb", 2)
    assert response.json()["workloads"]["created"] == 1
