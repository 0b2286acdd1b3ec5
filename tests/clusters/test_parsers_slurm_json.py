"""Slurm JSON: slurmrestd v0.0.38-v0.0.44, ``scontrol show node --json``, ``sinfo --json``."""

from __future__ import annotations

import json

import pytest

from clusters.parsers import SnapshotFormatError
from clusters.parsers.slurm_json import last_update, parse_slurm_json
from tests.fixtures.scheduler import fixture_json, sample_text


def _nodes(snapshot):
    return {n.name: n for n in snapshot.nodes}


def test_real_2205_slurmrestd_v0038_response():
    document = json.loads(sample_text("slurm-local-2205-slurmrestd-v0.0.38-nodes.json"))
    snapshot = parse_slurm_json(document)

    assert snapshot.format == "slurm-nodes-json"
    assert snapshot.api_version == "v0.0.38"
    assert snapshot.source_version == "22.05.8"
    assert snapshot.cluster_name is None  # v0.0.38 does not name the cluster
    nodes = _nodes(snapshot)
    assert sorted(nodes) == ["gpu-node1", "gpu-node2", "gpu-node3", "gpu-node4"]
    assert all(n.gpu_capacity == 8 for n in nodes.values())
    assert nodes["gpu-node1"].gpu_used == 3
    assert nodes["gpu-node1"].state == "mixed"
    assert nodes["gpu-node2"].gpu_used == 0
    assert nodes["gpu-node1"].slurm_version == "22.05.8"
    assert nodes["gpu-node1"].hostname == "localhost"
    assert nodes["gpu-node1"].memory_bytes == 1000 * 1024 * 1024


def test_real_2205_sinfo_json_is_the_v0038_node_list():
    snapshot = parse_slurm_json(json.loads(sample_text("slurm-local-2205-sinfo.json")))
    assert snapshot.format == "slurm-nodes-json"
    assert len(snapshot.nodes) == 4
    assert {n.state for n in snapshot.nodes} == {"idle"}
    assert all(n.gpu_capacity == 8 and n.gpu_used == 0 for n in snapshot.nodes)


def test_real_v0043_response_with_states_as_lists_and_number_objects():
    snapshot = parse_slurm_json(
        json.loads(sample_text("slurm-restd-v0.0.43-node-gpu-mixed-slurmweb.json"))
    )
    assert snapshot.api_version == "v0.0.43"
    assert snapshot.source_version == "25.05.4"
    assert snapshot.cluster_name == "hpc"
    (node,) = snapshot.nodes
    assert node.name == "gpu1"
    assert node.state == "mixed" and node.raw_state == "MIXED"
    assert (node.gpu_capacity, node.gpu_allocatable, node.gpu_used) == (4, 4, 1)
    assert node.gpu_product == "h100"
    assert node.slurm_version == "25.05.4"
    assert node.cpus == 32
    assert node.memory_bytes == 524288 * 1024 * 1024
    assert node.kernel_version == "6.12.43+deb13-amd64"


def test_real_2302_sinfo_dataparser_node_without_gpu():
    snapshot = parse_slurm_json(
        json.loads(sample_text("slurm-sinfo-N-json-2302-dataparser-v0.0.39-nogpu-rivosinc.json"))
    )
    assert snapshot.format == "slurm-sinfo-json"
    assert snapshot.api_version == "v0.0.39"
    assert snapshot.source_version == "23.02.5"
    (node,) = snapshot.nodes
    assert node.name == "localhost"
    assert node.state == "allocated"
    assert node.partitions == ["debug"]
    assert (node.gpu_capacity, node.gpu_used, node.gres) == (0, 0, [])
    assert node.cpus == 1


@pytest.mark.parametrize(
    ("version", "release"),
    [("40", "23.11.10"), ("41", "24.05.8"), ("42", "24.11.5"), ("44", "25.11.1")],
)
def test_slurmrestd_responses_from_the_published_schemas(version, release):
    document = fixture_json(f"slurmrestd-v0.0.{version}-nodes.json")
    snapshot = parse_slurm_json(document)

    assert snapshot.api_version == f"v0.0.{version}"
    assert snapshot.source_version == release
    assert snapshot.cluster_name == "hpc-east"
    assert last_update(document) == 1713780500
    nodes = _nodes(snapshot)
    assert len(nodes) == 9

    assert nodes["gpu-h100-01"].gpu_capacity == 8 and nodes["gpu-h100-01"].gpu_used == 0
    assert nodes["gpu-h100-01"].hostname == "gpu-h100-01.hpc.example.org"
    assert nodes["gpu-h100-01"].addresses == ["10.3.0.1"]
    assert nodes["gpu-h100-01"].features == ["h100", "nvlink"]
    assert nodes["gpu-h100-02"].gpu_used == 5  # IDX:0-3,6
    assert nodes["gpu-h100-02"].partitions == ["gpu", "long"]

    drained = nodes["gpu-h100-03"]
    assert (drained.state, drained.state_flags) == ("idle", ["drain"])
    assert drained.ready and not drained.schedulable
    assert drained.reason == "GPU 5 ECC DBE, RMA 7781"
    assert drained.reason_set_by == "root"

    mig = nodes["gpu-mig-01"]
    assert mig.gpu_capacity == 14 and mig.gpu_used == 14
    assert mig.mig_resources == {"1g.10gb": 7}
    assert mig.gpu_product == "nvidia_h100_80gb_hbm3"

    assert nodes["gpu-mixed-01"].gpu_capacity == 6
    assert nodes["gpu-mixed-01"].gpu_used == 1

    down = nodes["gpu-down-01"]
    assert (down.state, down.state_flags) == ("down", ["not_responding"])
    assert not down.ready and not down.schedulable
    assert down.slurm_version is None and down.os is None

    maint = nodes["gpu-maint-01"]
    assert maint.state_flags == ["maintenance", "reserved"]
    assert maint.ready and not maint.schedulable

    assert nodes["cpu-0001"].gpu_capacity == 0 and nodes["cpu-0001"].gres == []
    cloud = nodes["cloud-0001"]
    assert cloud.state_flags == ["cloud", "powered_down"]
    assert not cloud.ready and cloud.schedulable


def test_scontrol_json_of_2302_uses_plain_times_and_the_old_meta():
    snapshot = parse_slurm_json(fixture_json("slurm-scontrol-show-node-json-2302-v0.0.39.json"))
    assert snapshot.format == "slurm-nodes-json"
    assert snapshot.api_version == "v0.0.39"
    assert snapshot.source_version == "23.02.7"
    assert snapshot.cluster_name is None
    nodes = _nodes(snapshot)
    assert len(nodes) == 6
    assert nodes["gpu-h100-02"].gpu_used == 5
    assert nodes["gpu-h100-03"].state_flags == ["drain"]
    assert nodes["gpu-h100-01"].slurm_version == "23.02.7"


def test_sinfo_groups_expand_to_one_record_per_node_with_all_partitions():
    snapshot = parse_slurm_json(fixture_json("slurm-sinfo-json-2311-v0.0.40-grouped.json"))
    assert snapshot.format == "slurm-sinfo-json"
    assert snapshot.cluster_name == "hpc-west"
    nodes = _nodes(snapshot)
    assert sorted(nodes) == [
        "cpu-0001",
        "cpu-0002",
        "gpu-h100-01",
        "gpu-h100-02",
        "gpu-h100-03",
        "gpu-h100-04",
        "gpu-h100-05",
    ]
    assert nodes["gpu-h100-04"].addresses == ["10.4.0.4"]
    assert nodes["gpu-h100-04"].gpu_capacity == 8
    assert nodes["gpu-h100-04"].cpus == 224
    assert nodes["gpu-h100-02"].partitions == ["gpu", "long"]
    assert nodes["gpu-h100-02"].gpu_used == 3
    assert nodes["gpu-h100-03"].reason == "nvidia-smi reports 7 GPUs"
    assert not nodes["gpu-h100-03"].schedulable
    assert nodes["cpu-0002"].addresses == []  # the group lists no addresses


def test_an_error_answer_is_not_an_empty_cluster():
    with pytest.raises(SnapshotFormatError, match="Unable to query nodes"):
        parse_slurm_json(fixture_json("slurmrestd-v0.0.41-nodes-auth-error.json"))


def test_a_v0038_error_answer_names_slurms_error():
    document = {"meta": {}, "errors": [{"error": "Unspecified error", "errno": -1}], "nodes": []}
    with pytest.raises(SnapshotFormatError, match="Unspecified error"):
        parse_slurm_json(document)


def test_an_empty_node_list_without_errors_is_an_empty_snapshot():
    assert parse_slurm_json({"nodes": [], "errors": []}).nodes == []


@pytest.mark.parametrize(
    "document",
    [
        {"nodes": [{"name": ""}]},
        {"nodes": ["gpu1"]},
        {"nodes": [{"name": "a", "state": "idle"}, {"name": "a", "state": "idle"}]},
    ],
)
def test_broken_node_lists_are_rejected(document):
    with pytest.raises(SnapshotFormatError):
        parse_slurm_json(document)


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ({"sinfo": [{"nodes": {"nodes": True}}]}, "sinfo[0].nodes.nodes: expected a list"),
        ({"sinfo": [{"nodes": {"hostnames": 3}}]}, "sinfo[0].nodes.hostnames: expected a list"),
        ({"sinfo": [], "errors": 1.5}, "errors: expected a list, got a number"),
        ({"nodes": [{"name": "a", "state_flags": 7}]}, "nodes[0].state_flags: expected a list"),
    ],
)
def test_a_wrong_type_where_a_list_belongs_names_its_path(document, path):
    """Found by the intakes fuzzer: these were TypeErrors the safety net called 'malformed'."""
    with pytest.raises(SnapshotFormatError, match=path.replace("[", r"\[").replace("]", r"\]")):
        parse_slurm_json(document)
