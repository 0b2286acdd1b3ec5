"""``parse_snapshot``: every real sample and fixture, detected or rejected with a reason."""

from __future__ import annotations

import pytest

from clusters.parsers import ACCEPTED_FORMATS, SnapshotFormatError, parse_snapshot
from tests.fixtures.scheduler import (
    SCHEDULER_SAMPLES,
    fixture_path,
    sample_path,
    sample_text,
)

# Real samples that are node snapshots: (format, kind, node count, GPU capacity total).
SNAPSHOT_SAMPLES = {
    "k8s-describe-8gpu-7allocatable-snippet-nvdocs.txt": ("kubernetes-describe", 1, 7),
    "slurm-local-2205-scontrol-o-show-node.txt": ("slurm-scontrol-text", 4, 32),
    "slurm-local-2205-scontrol-show-node-detail.txt": ("slurm-scontrol-text", 1, 8),
    "slurm-local-2205-scontrol-show-node.txt": ("slurm-scontrol-text", 4, 32),
    "slurm-local-2205-sinfo.json": ("slurm-nodes-json", 4, 32),
    "slurm-local-2205-slurmrestd-v0.0.38-nodes.json": ("slurm-nodes-json", 4, 32),
    "slurm-restd-v0.0.43-node-gpu-mixed-slurmweb.json": ("slurm-nodes-json", 1, 4),
    "slurm-sinfo-N-json-2302-dataparser-v0.0.39-nogpu-rivosinc.json": ("slurm-sinfo-json", 1, 0),
}
# Real samples that are not node snapshots, and why parse_snapshot says no.
REJECTED_SAMPLES = {
    "k8s-node-labels-h100-mig-mixed-nvdocs.json": "map of node labels",
    "slurm-conf-mig-nodename-schedmd-doc.txt": "unrecognised",
    "slurm-gres-conf-autodetect-nvml-schedmd-doc.txt": "unrecognised",
    # Aggregated rows without node names: not a node set (its GRES are tested elsewhere).
    "slurm-sinfo-partitions-gres-2511-a100-a800-dgx2-mig-sckyzo.txt": "aggregates nodes",
}

FIXTURES = {
    "k8s-kubectl-get-nodes-gpu-fleet.json": ("kubernetes-nodelist", 6, 8 + 32 + 7 + 4),
    "k8s-kubectl-describe-nodes.txt": ("kubernetes-describe", 2, 12),
    "slurm-scontrol-show-node-d-edge-cases.txt": (
        "slurm-scontrol-text",
        8,
        8 + 6 + 14 + 16 + 4 + 21 + 4,
    ),
    "slurm-scontrol-o-show-node-d-edge-cases.txt": ("slurm-scontrol-text", 8, 73),
    "slurm-scontrol-show-node-json-2302-v0.0.39.json": ("slurm-nodes-json", 6, 48),
    "slurm-sinfo-json-2311-v0.0.40-grouped.json": ("slurm-sinfo-json", 7, 40),
    "slurmrestd-v0.0.40-nodes.json": ("slurm-nodes-json", 9, 53),
    "slurmrestd-v0.0.41-nodes.json": ("slurm-nodes-json", 9, 53),
    "slurmrestd-v0.0.42-nodes.json": ("slurm-nodes-json", 9, 53),
    "slurmrestd-v0.0.44-nodes.json": ("slurm-nodes-json", 9, 53),
    "slurm-local-2205-sinfo-N-O-nodelist-partition-gres-gresused-statelong.txt": (
        "slurm-sinfo-text",
        4,
        32,
    ),
    "slurm-local-2205-sinfo-N-o-N-P-G-T-c-m.txt": ("slurm-sinfo-text", 4, 32),
    "slurm-local-2205-sinfo-N-o-sixteen-columns-reason-with-spaces.txt": (
        "slurm-sinfo-text",
        4,
        32,
    ),
    "slurm-local-2205-sinfo-N-O-wide-long-gres-type.txt": ("slurm-sinfo-text", 4, 32),
    "slurm-sinfo-ahNO-nodehost-gres-gresused-statelong-states.txt": ("slurm-sinfo-text", 13, 95),
}


def test_every_scheduler_sample_is_covered():
    assert set(SNAPSHOT_SAMPLES) | set(REJECTED_SAMPLES) == set(SCHEDULER_SAMPLES)


@pytest.mark.parametrize("name", sorted(SNAPSHOT_SAMPLES))
def test_real_samples_are_detected(name):
    expected_format, count, gpus = SNAPSHOT_SAMPLES[name]
    snapshot = parse_snapshot(sample_path(name).read_bytes())
    assert snapshot.format == expected_format
    assert snapshot.kind == ("kubernetes" if name.startswith("k8s") else "slurm")
    assert len(snapshot.nodes) == count
    assert sum(n.gpu_capacity for n in snapshot.nodes) == gpus


@pytest.mark.parametrize("name", sorted(REJECTED_SAMPLES))
def test_real_non_snapshots_are_rejected_with_the_reason(name):
    with pytest.raises(SnapshotFormatError, match=REJECTED_SAMPLES[name]) as caught:
        parse_snapshot(sample_text(name))
    assert "Accepted snapshot formats" in str(caught.value)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_own_fixtures_are_detected(name):
    expected_format, count, gpus = FIXTURES[name]
    snapshot = parse_snapshot(fixture_path(name).read_text())
    assert snapshot.format == expected_format
    assert len(snapshot.nodes) == count
    assert sum(n.gpu_capacity for n in snapshot.nodes) == gpus


def test_records_serialise_to_plain_json_types():
    import json

    snapshot = parse_snapshot(fixture_path("slurmrestd-v0.0.44-nodes.json").read_bytes())
    assert json.loads(json.dumps(snapshot.to_dict()))["nodes"][0]["name"] == "gpu-h100-01"


def test_a_byte_order_mark_and_surrounding_blank_lines_are_fine():
    body = b"\xef\xbb\xbf\n\n" + sample_path("slurm-local-2205-scontrol-show-node.txt").read_bytes()
    assert len(parse_snapshot(body).nodes) == 4


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"", "empty"),
        (b"   \n", "empty"),
        (b"\xff\xfe\x00garbage", "UTF-8"),
        (b'{"kind": "NodeList", "items": [', "JSON is broken at line 1"),
        (b"[1, 2]", "JSON list"),
        (b'{"kind": "PodList", "items": []}', "pod list"),
        (b'{"kind": "ConfigMap"}', "kind 'ConfigMap'"),
        (b'{"hello": "world"}', "unknown shape"),
        (b"kind: NodeList\nitems: [\n", "YAML is broken"),
        (b"NODELIST   NODES PARTITION STATE\ngpu-node1 1 gpu* idle\n", "no GRES column"),
        (b"Nov 30 host kernel: eth0 up\nNov 30 host sshd: login\n", "unrecognised"),
        (b"NodeName=n1 State=IDLE Gres=gpu:h100:8\nPartitionName=gpu Nodes=n1\n", "slurm.conf"),
    ],
)
def test_bad_input_is_a_format_error_naming_what_is_accepted(body, why):
    with pytest.raises(SnapshotFormatError, match=why) as caught:
        parse_snapshot(body)
    message = str(caught.value)
    for accepted in ACCEPTED_FORMATS:
        assert accepted in message


def test_malformed_values_inside_a_known_shape_are_a_format_error_naming_the_path():
    with pytest.raises(
        SnapshotFormatError, match=r"items\[0\]\.status: expected an object, got a number"
    ):
        parse_snapshot(b'{"kind": "NodeList", "items": [{"metadata": {"name": "a"}, "status": 7}]}')


def test_the_error_does_not_echo_the_input():
    secret = "token-abc123-secret"
    with pytest.raises(SnapshotFormatError) as caught:
        parse_snapshot(f"Authorization: Bearer {secret}\n")
    assert secret not in str(caught.value)
