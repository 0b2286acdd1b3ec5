"""``scontrol show node`` text: real Debian 22.05 captures and our own edge-case fixtures."""

from __future__ import annotations

import pytest

from clusters.parsers import SnapshotFormatError
from clusters.parsers.slurm_text import parse_fields, parse_scontrol_text
from tests.fixtures.scheduler import fixture_text, sample_text

LOCAL_SAMPLES = (
    "slurm-local-2205-scontrol-show-node.txt",
    "slurm-local-2205-scontrol-o-show-node.txt",
)


@pytest.mark.parametrize("name", LOCAL_SAMPLES)
def test_real_2205_output_gives_four_h100_nodes(name):
    snapshot = parse_scontrol_text(sample_text(name))

    assert snapshot.kind == "slurm"
    assert snapshot.format == "slurm-scontrol-text"
    assert snapshot.source_version == "22.05.8"
    assert [n.name for n in snapshot.nodes] == [f"gpu-node{i}" for i in range(1, 5)]
    for node in snapshot.nodes:
        assert node.gpu_capacity == node.gpu_allocatable == 8
        assert node.gpu_product == "h100"
        assert node.gpu_used is None  # no GresUsed without -d
        assert node.hostname == "localhost"
        assert node.addresses == ["localhost"]
        assert node.partitions == ["gpu"]
        assert node.cpus == 2
        assert node.memory_bytes == 1000 * 1024 * 1024
        assert node.os == "Linux 6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0"
        assert node.kernel_version == "6.18.44-fc-v669"
        assert node.slurm_version == "22.05.8"
        assert node.ready and node.schedulable
        assert node.gres == [
            {
                "name": "gpu",
                "type": "h100",
                "count": 8,
                "used": None,
                "used_indexes": None,
                "mig_profile": None,
            }
        ]
    assert [n.state for n in snapshot.nodes] == ["mixed", "idle", "idle", "idle"]


def test_one_line_and_multi_line_layouts_agree_on_the_real_capture():
    multi = parse_scontrol_text(sample_text(LOCAL_SAMPLES[0]))
    one = parse_scontrol_text(sample_text(LOCAL_SAMPLES[1]))
    assert [n.to_dict() for n in multi.nodes] == [n.to_dict() for n in one.nodes]


def test_detail_output_reports_gpus_in_use_from_gres_used():
    snapshot = parse_scontrol_text(sample_text("slurm-local-2205-scontrol-show-node-detail.txt"))

    (node,) = snapshot.nodes
    assert node.name == "gpu-node1"
    assert node.gpu_capacity == 8
    assert node.gpu_used == 3
    assert node.gres[0]["used_indexes"] == "0-2"
    assert node.state == "mixed"


@pytest.fixture(
    params=[
        "slurm-scontrol-show-node-d-edge-cases.txt",
        "slurm-scontrol-o-show-node-d-edge-cases.txt",
    ]
)
def edge(request):
    snapshot = parse_scontrol_text(fixture_text(request.param))
    return {n.name: n for n in snapshot.nodes}


def test_drained_node_keeps_its_whole_reason_and_who_set_it(edge):
    node = edge["dgx-a01"]
    assert node.state == "idle"
    assert node.state_flags == ["drain"]
    assert node.raw_state == "IDLE+DRAIN"
    assert node.ready is True
    assert node.schedulable is False
    # The reason holds a comma, a colon and a Key=value word; it ends at its stamp.
    assert node.reason == "GPU 3 Xid 79, fallen off the bus: NVRM Code=79 see ticket 4411"
    assert node.reason_set_by == "root"
    assert node.hostname == "dgx-a01.cluster.example.org"
    assert node.addresses == ["10.1.0.11"]
    assert node.partitions == ["gpu", "debug"]
    assert node.features == ["h100", "nvlink", "ib"]
    assert node.os == "Linux 5.15.0-105-generic #115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024"
    assert node.gpu_capacity == 8 and node.gpu_used == 0


def test_several_gpu_types_sum_into_capacity(edge):
    node = edge["dgx-a02"]
    assert node.gpu_capacity == 6  # gpu:h100:2 + gpu:h200:4
    assert node.gpu_allocatable == 6
    assert node.gpu_used == 4  # 1 h100 + 3 h200
    assert node.gpu_product == "h100,h200"
    assert {(g["type"], g["count"], g["used"]) for g in node.gres} == {
        ("h100", 2, 1),
        ("h200", 4, 3),
    }


def test_mig_gres_counts_as_gpus_and_as_mig_resources(edge):
    node = edge["mig-a03"]
    assert node.gpu_capacity == 14  # 7 MIG slices + 7 whole GPUs, per the contract
    assert node.mig_resources == {"1g.10gb": 7}
    assert node.gpu_used == 2
    assert node.gpu_product == "h100"


def test_down_not_responding_node_is_neither_ready_nor_schedulable(edge):
    node = edge["dgx2-b01"]
    assert node.state == "down"
    assert node.state_flags == ["not_responding"]
    assert not node.ready and not node.schedulable
    assert node.reason == "Not responding" and node.reason_set_by == "slurm"
    # shard GRES are not GPUs
    assert node.gpu_capacity == 16
    assert {g["name"] for g in node.gres} == {"gpu", "shard"}
    assert node.kernel_version == "4.18.0-513.24.1.el8_9.x86_64"


def test_down_star_spelling_means_not_responding(edge):
    node = edge["gpu-f01"]
    assert node.state == "down"
    assert set(node.state_flags) == {"not_responding", "drain"}
    assert node.reason == "Kill task failed"


def test_null_gres_is_no_gpu_and_comment_with_spaces_does_not_leak(edge):
    node = edge["cpu-c01"]
    assert node.gres == []
    assert node.gpu_capacity == 0 and node.gpu_used == 0
    assert node.state == "allocated"
    assert node.reason is None


def test_untyped_gpu_gres_with_null_type_in_use(edge):
    node = edge["gpu-d01"]
    assert node.gpu_capacity == 4
    assert node.gpu_used == 2
    assert node.gpu_product is None
    assert node.state == "mixed" and node.state_flags == ["drain"]
    assert node.reason_set_by == "admin"
    assert node.addresses == ["gpu-d01.ib.example.org"]
    assert node.hostname == "gpu-d01"


def test_powered_down_cloud_node_with_autodetected_mig_type(edge):
    node = edge["cloud-e01"]
    assert node.state == "idle"
    assert node.state_flags == ["cloud", "powered_down"]
    assert node.ready is False and node.schedulable is True
    assert node.gpu_capacity == 21
    assert node.mig_resources == {"1g.5gb": 21}
    assert node.gpu_product == "nvidia_a100"
    assert node.slurm_version is None and node.os is None


def test_reason_ends_at_its_stamp_even_with_keys_after_it():
    fields = parse_fields(
        "NodeName=n1 State=IDLE+DRAIN Reason=ECC=DBE on GPU 2 [root@2024-01-01T00:00:00] "
        "Comment=rack 3 Weight=1"
    )
    assert fields["Reason"] == "ECC=DBE on GPU 2 [root@2024-01-01T00:00:00]"
    assert fields["Comment"] == "rack 3"
    assert fields["Weight"] == "1"


def test_no_nodes_in_the_system_is_an_empty_snapshot():
    snapshot = parse_scontrol_text("No nodes in the system\n")
    assert snapshot.nodes == []
    assert snapshot.kind == "slurm"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("NodeName= State=IDLE\n", "empty NodeName"),
        ("NodeName=a State=IDLE\n\nNodeName=a State=IDLE\n", "twice"),
        ("garbage\nNodeName=a State=IDLE\n", "does not start"),
        ("NodeName=tux[1-16] gres=gpu:a100:1\n", "slurm.conf"),
    ],
)
def test_broken_scontrol_text_is_rejected(text, why):
    with pytest.raises(SnapshotFormatError, match=why.split()[0]):
        parse_scontrol_text(text)
