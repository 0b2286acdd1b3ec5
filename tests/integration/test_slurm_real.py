"""The parsers and the slurmrestd pull path against a real Slurm (Debian's 22.05).

Four ``slurmd -N`` GPU nodes (``Gres=gpu:h100:8``) under one slurmctld, read through
``scontrol show node`` (both layouts and ``-d``), ``sinfo --json`` and slurmrestd
(openapi/v0.0.38, JWT) with ``fetch_nodes``. A batch job holding 3 GPUs must show up as
``gpu_used == 3`` everywhere Slurm reports GresUsed.
"""

from __future__ import annotations

import time

import pytest

from clusters.parsers import parse_document, parse_snapshot
from clusters.pull.slurmrestd import SlurmRestError, fetch_nodes

pytestmark = pytest.mark.slurm

# The session fixture lives in the harness; binding it here makes pytest find it.


def _assert_four_gpu_nodes(snapshot, cluster) -> None:
    assert snapshot.kind == "slurm"
    assert sorted(n.name for n in snapshot.nodes) == cluster.node_names
    for node in snapshot.nodes:
        assert node.gpu_capacity == cluster.gpus_per_node
        assert node.gpu_allocatable == cluster.gpus_per_node
        assert node.gpu_product == cluster.gpu_type
        assert node.hostname == "localhost"
        assert node.partitions == ["gpu"]
        assert node.cpus == 2
        assert node.ready


@pytest.mark.parametrize("one_line", [False, True], ids=["multi-line", "one-line"])
def test_live_scontrol_show_node(slurm_cluster, one_line):
    args = ["-o", "show", "node"] if one_line else ["show", "node"]
    snapshot = parse_snapshot(slurm_cluster.run(slurm_cluster.scontrol, *args))

    assert snapshot.format == "slurm-scontrol-text"
    assert snapshot.source_version and snapshot.source_version.startswith("22.05")
    _assert_four_gpu_nodes(snapshot, slurm_cluster)
    assert all(n.gpu_used is None for n in snapshot.nodes)  # no GresUsed without -d


def test_live_sinfo_json(slurm_cluster):
    snapshot = parse_snapshot(slurm_cluster.run(slurm_cluster.sinfo, "--json"))

    assert snapshot.format == "slurm-nodes-json"
    assert snapshot.api_version == "v0.0.38"
    _assert_four_gpu_nodes(snapshot, slurm_cluster)


def test_live_slurmrestd_through_fetch_nodes(slurm_cluster):
    document = fetch_nodes(
        slurm_cluster.restd_url,
        slurm_cluster.token,
        user=slurm_cluster.user,
        version="v0.0.38",
        timeout=10,
    )
    snapshot = parse_document(document)

    assert snapshot.api_version == "v0.0.38"
    _assert_four_gpu_nodes(snapshot, slurm_cluster)


def test_live_slurmrestd_version_is_detected(slurm_cluster):
    document = fetch_nodes(
        slurm_cluster.restd_url, slurm_cluster.token, user=slurm_cluster.user, version="auto"
    )
    assert parse_document(document).api_version == "v0.0.38"


def test_live_slurmrestd_refuses_a_wrong_token_without_echoing_it(slurm_cluster):
    wrong = slurm_cluster.token[:-6] + "AAAAAA"
    with pytest.raises(SlurmRestError) as caught:
        fetch_nodes(slurm_cluster.restd_url, wrong, user=slurm_cluster.user, timeout=10)
    assert wrong not in str(caught.value)
    assert slurm_cluster.token not in str(caught.value)


def _gpu_used(cluster) -> dict[str, int | None]:
    snapshot = parse_snapshot(cluster.run(cluster.scontrol, "show", "node", "-d"))
    return {n.name: n.gpu_used for n in snapshot.nodes}


def test_a_job_holding_three_gpus_shows_as_gres_used(slurm_cluster):
    job = slurm_cluster.submit_gpu_job(3, seconds=60)
    try:
        slurm_cluster.wait_job_running(job)

        used = _gpu_used(slurm_cluster)
        assert sorted(used.values()) == [0, 0, 0, 3]
        busy = next(name for name, count in used.items() if count == 3)

        document = fetch_nodes(
            slurm_cluster.restd_url, slurm_cluster.token, user=slurm_cluster.user, timeout=10
        )
        restd = {n.name: n for n in parse_document(document).nodes}
        assert restd[busy].gpu_used == 3
        assert restd[busy].gpu_capacity == 8
        assert restd[busy].state in ("mixed", "allocated")
        assert {n.gpu_used for name, n in restd.items() if name != busy} == {0}

        sinfo = {
            n.name: n
            for n in parse_snapshot(slurm_cluster.run(slurm_cluster.sinfo, "--json")).nodes
        }
        assert sinfo[busy].gpu_used == 3
    finally:
        slurm_cluster.cancel_all_jobs()
    # The GPUs come back once the job is gone (bounded wait: Slurm frees them async).
    deadline = time.monotonic() + 20
    while set(_gpu_used(slurm_cluster).values()) != {0} and time.monotonic() < deadline:
        time.sleep(0.2)
    assert set(_gpu_used(slurm_cluster).values()) == {0}


@pytest.mark.django_db
def test_a_live_per_node_sinfo_listing_is_pushed_as_the_node_set(
    slurm_cluster, staff, django_capture_on_commit_callbacks
):
    """`sinfo -N -O ...` from the real cluster, posted to the API like `scontrol show node`:
    every node with its GPUs, the 3 a job holds in use; the header-less form reads alike."""
    from rest_framework.test import APIClient

    from clusters.models import Cluster, Node

    job = slurm_cluster.submit_gpu_job(3, seconds=60)
    try:
        slurm_cluster.wait_job_running(job)
        fields = "NodeList:30,Partition:20,Gres:40,GresUsed:50,StateLong:20"
        listing = slurm_cluster.run(slurm_cluster.sinfo, "-N", "-O", fields)
        client = APIClient()
        client.force_authenticate(staff)
        with django_capture_on_commit_callbacks(execute=True):
            response = client.generic(
                "POST", "/api/v1/clusters/live-sinfo/snapshots/", listing, content_type="text/plain"
            )
        assert response.status_code in (200, 201, 202), response.content
        nodes = {n.name: n for n in Node.objects.filter(cluster__name="live-sinfo")}
        assert sorted(nodes) == slurm_cluster.node_names
        assert sorted(n.gpu_used for n in nodes.values()) == [0, 0, 0, 3]
        assert {n.gpu_capacity for n in nodes.values()} == {slurm_cluster.gpus_per_node}
        assert {tuple(n.partitions) for n in nodes.values()} == {("gpu",)}
        cluster = Cluster.objects.get(name="live-sinfo")
        assert cluster.last_snapshot_format == "slurm-sinfo-text"

        headerless = slurm_cluster.run(slurm_cluster.sinfo, "-ahNO", fields)
        parsed = {n.name: n.gpu_used for n in parse_snapshot(headerless).nodes}
        assert parsed == {name: node.gpu_used for name, node in nodes.items()}
    finally:
        slurm_cluster.cancel_all_jobs()
    deadline = time.monotonic() + 20
    while set(_gpu_used(slurm_cluster).values()) != {0} and time.monotonic() < deadline:
        time.sleep(0.2)
