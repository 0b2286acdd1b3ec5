"""Scheduler snapshots read to the last byte: the shared decoder, scontrol captures cut
short, and GPUs in use from AllocTRES when plain scontrol has no GresUsed."""

from __future__ import annotations

import json
import re

import pytest

from clusters.models import Node
from clusters.parsers import SnapshotFormatError, parse_snapshot
from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from tests.fixtures.scheduler import fixture_text, sample_text
from tests.nodes import scontrol_node, scontrol_text
from tests.reports import apply_reports, make_report

SCONTROL_TEXTS = (
    "slurm-local-2205-scontrol-show-node.txt",
    "slurm-local-2205-scontrol-o-show-node.txt",
    "slurm-local-2205-scontrol-show-node-detail.txt",
)
OWN_SCONTROL_TEXTS = (
    "slurm-scontrol-show-node-d-edge-cases.txt",
    "slurm-scontrol-o-show-node-d-edge-cases.txt",
)


def _text(name: str) -> str:
    return sample_text(name) if name.startswith("slurm-local") else fixture_text(name)


# -- one decoder ------------------------------------------------------------------------------


def test_a_bom_and_crlf_change_no_scontrol_snapshot():
    data = sample_text("slurm-local-2205-scontrol-show-node.txt").encode()
    plain = parse_snapshot(data)
    assert parse_snapshot(b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n")).nodes == plain.nodes


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"NodeName=a State=IDLE\x00\n", r"NUL character at line 1 \(offset 21\)"),
        ("NodeName=a State=IDLE\n".encode("utf-16"), "UTF-16"),
    ],
)
def test_binary_and_utf16_snapshots_are_refused_with_the_reason(body, why):
    with pytest.raises(SnapshotFormatError, match=why):
        parse_snapshot(body)


@pytest.mark.django_db
def test_a_pod_list_after_a_bom_is_still_a_pod_list():
    reports = [make_report("dgx-01")]
    apply_reports(*reports)
    node = {
        "kind": "Node",
        "metadata": {"name": "dgx-01"},
        "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}},
    }
    snapshot_ingest(cluster_name="prod", raw=json.dumps({"kind": "NodeList", "items": [node]}))
    pod = {
        "kind": "Pod",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {
            "nodeName": "dgx-01",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "3"}}}],
        },
        "status": {"phase": "Running"},
    }
    body = b"\xef\xbb\xbf" + json.dumps({"kind": "List", "items": [pod]}).encode()
    result = snapshot_ingest(cluster_name="prod", raw=body)
    assert result.pods == 1
    assert Node.objects.get(name="dgx-01").gpu_used == 3


# -- a capture cut short ----------------------------------------------------------------------


@pytest.mark.parametrize("name", SCONTROL_TEXTS + OWN_SCONTROL_TEXTS)
def test_every_prefix_is_refused_or_the_records_it_holds_whole(name):
    """Cut anywhere, a capture is refused, or (cut after a record's last fields, with or
    without its blank line) it is exactly the records it holds: never fewer nodes than
    records begun, never a changed node."""
    data = _text(name)
    whole = parse_snapshot(data).nodes
    accepted: dict[int, int] = {}
    for cut in range(1, len(data) + 1):
        prefix = data[:cut]
        try:
            nodes = parse_snapshot(prefix).nodes
        except SnapshotFormatError:
            continue
        accepted[len(nodes)] = accepted.get(len(nodes), 0) + 1
        assert nodes == whole[: len(nodes)], cut
        assert len(re.findall(r"^NodeName=", prefix, re.MULTILINE)) == len(nodes), cut
    assert sorted(accepted) == list(range(1, len(whole) + 1))  # each record, once whole


def test_the_refusal_names_the_cut_record_and_why():
    data = sample_text("slurm-local-2205-scontrol-show-node.txt")
    third = data.index("NodeName=gpu-node3")
    with pytest.raises(SnapshotFormatError) as caught:
        parse_snapshot(data[: data.index("CfgTRES", third)])
    message = str(caught.value)
    assert "last scontrol record (record 3, node 'gpu-node3') is cut short" in message
    assert "it lacks AllocTRES, AveWatts, CapWatts, CfgTRES, CurrentWatts and 3 more" in message


def test_a_fragment_of_a_next_record_is_refused():
    data = sample_text("slurm-local-2205-scontrol-show-node.txt")
    first_two = data[: data.index("NodeName=gpu-node3")].rstrip("\n")
    with pytest.raises(SnapshotFormatError, match="the text ends inside the next record"):
        parse_snapshot(first_two + "\n\nNodeNa")


@pytest.mark.parametrize("end", ["", "\n", "\n\n"], ids=["no-newline", "newline", "blank-line"])
def test_records_with_their_last_fields_are_whole_without_the_blank_line(end):
    data = sample_text("slurm-local-2205-scontrol-show-node.txt")
    first_two = data[: data.index("NodeName=gpu-node3")].rstrip("\n") + end
    assert [n.name for n in parse_snapshot(first_two).nodes] == ["gpu-node1", "gpu-node2"]
    one_line = sample_text("slurm-local-2205-scontrol-o-show-node.txt").rstrip("\n") + end[:1]
    assert len(parse_snapshot(one_line).nodes) == 4


def test_a_cut_inside_the_last_fields_is_refused_without_a_newline():
    data = sample_text("slurm-local-2205-scontrol-o-show-node.txt").rstrip("\n")
    with pytest.raises(SnapshotFormatError, match="inside its ExtSensorsTemp= value"):
        parse_snapshot(data[:-2])  # ExtSensorsTemp=n
    with pytest.raises(SnapshotFormatError, match="it lacks ExtSensorsTemp, which the other"):
        parse_snapshot(data[: data.rindex(" ExtSensorsTemp")])
    lone = data[: data.index("\n")]
    with pytest.raises(SnapshotFormatError, match="ends before ExtSensorsTemp=, which the"):
        parse_snapshot(lone[: lone.rindex(" ExtSensorsTemp")] + "\n")
    detail = sample_text("slurm-local-2205-scontrol-show-node-detail.txt")
    with pytest.raises(SnapshotFormatError, match="ends before ExtSensorsWatts=, ExtSensorsTemp="):
        parse_snapshot(detail[: detail.rindex("ExtSensorsWatts") + 5] + "\n\n")


def test_a_reason_cut_inside_its_stamp_is_refused():
    text = fixture_text("slurm-scontrol-show-node-d-edge-cases.txt")
    last_reason = text.rindex("Reason=")
    stamp = text.index("[", last_reason)  # "Kill task failed [root@2024-04-22T08:12:44]"
    with pytest.raises(SnapshotFormatError, match="gpu-f01'\\) is cut short: it ends inside its"):
        parse_snapshot(text[: stamp + 6] + "\n\n")


def test_a_last_node_lacking_optional_lines_is_whole():
    # Never-registered nodes print no Version/OS; nodes in no partition no Partitions.
    first = scontrol_node("gpu001")
    last = scontrol_node("gpu002").replace("   Partitions=gpu\n", "")
    last = re.sub(r"   OS=.*\n", "", last).replace(" Version=23.11.4", "")
    nodes = parse_snapshot(scontrol_text(first, last)).nodes
    assert [n.name for n in nodes] == ["gpu001", "gpu002"] and nodes[1].partitions == []


def test_hand_written_minimal_records_are_still_read():
    nodes = parse_snapshot(
        "NodeName=n1 State=IDLE Gres=gpu:h100:8\nNodeName=n2 State=IDLE Gres=(null)\n"
    ).nodes
    assert [n.gpu_capacity for n in nodes] == [8, 0]


# -- AllocTRES --------------------------------------------------------------------------------


def _with_tres(text: str, cfg: str, alloc: str) -> str:
    return text.replace(
        "   CfgTRES=cpu=224,mem=2000000M,billing=224\n   AllocTRES=\n",
        f"   CfgTRES={cfg}\n   AllocTRES={alloc}\n",
    )


@pytest.mark.parametrize("one_line", [False, True], ids=["multi-line", "one-line"])
@pytest.mark.parametrize(
    ("gres", "cfg", "alloc", "used", "per_gres"),
    [
        # untyped total and typed counts together: 4 GPUs, not 8
        ("gpu:h100:8", "cpu=224,gres/gpu=8", "cpu=8,mem=64G,gres/gpu=4,gres/gpu:h100=4", 4, [4]),
        ("gpu:h100:8", "cpu=224,gres/gpu=8", "cpu=8,mem=64G,gres/gpu=4", 4, [4]),
        ("gpu:h100:8", "cpu=224,gres/gpu=8,gres/gpu:h100=8", "gres/gpu:h100=2", 2, [2]),
        ("gpu:h100:8", "cpu=224,gres/gpu=8", "", 0, [0]),  # accounted, nothing allocated
        ("gpu:h100:8", "cpu=224,mem=2000000M", "cpu=8", None, [None]),  # GPUs not accounted
        (
            "gpu:1g.10gb:7,gpu:h100:7",
            "gres/gpu=14,gres/gpu:1g.10gb=7,gres/gpu:h100=7",
            "gres/gpu=2,gres/gpu:1g.10gb=2",
            2,
            [2, 0],
        ),
        ("gpu:a100:2,gpu:h100:4", "gres/gpu=6", "gres/gpu=3", 3, [None, None]),
        ("gpu:h100:2,shard:h100:32", "gres/gpu=2,gres/shard=32", "gres/shard=8", 0, [0, 8]),
    ],
)
def test_gpus_in_use_from_alloc_tres_without_gres_used(one_line, gres, cfg, alloc, used, per_gres):
    text = _with_tres(scontrol_node("gpu001", gres=gres), cfg, alloc)
    if one_line:
        text = " ".join(line.strip() for line in text.strip().split("\n")) + "\n"
    (node,) = parse_snapshot(text).nodes
    assert node.gpu_used == used
    assert [g["used"] for g in node.gres] == per_gres


def test_gres_used_wins_over_alloc_tres():
    # -d prints both; GresUsed says which indexes, so it is the one to keep
    nodes = {n.name: n for n in parse_snapshot(fixture_text(OWN_SCONTROL_TEXTS[0])).nodes}
    assert nodes["dgx-a02"].gpu_used == 4 and nodes["dgx-a02"].gres[1]["used_indexes"] == "2,4-5"


def test_the_local_2205_captures_claim_nothing_without_gpu_tres():
    # the cluster does not account gres/gpu as TRES: AllocTRES=cpu=1 says nothing of GPUs
    for name in SCONTROL_TEXTS[:2]:
        assert {n.gpu_used for n in parse_snapshot(sample_text(name)).nodes} == {None}


@pytest.mark.django_db
def test_placement_does_not_offer_gpus_alloc_tres_says_are_taken(api):
    apply_reports(make_report("gpu001"), make_report("gpu002"))
    busy = _with_tres(
        scontrol_node("gpu001", state="MIXED"),
        "cpu=224,mem=2000000M,gres/gpu=8,gres/gpu:h100=8",
        "cpu=8,mem=64G,gres/gpu=6,gres/gpu:h100=6",
    )
    free = _with_tres(scontrol_node("gpu002"), "cpu=224,gres/gpu=8,gres/gpu:h100=8", "")
    snapshot_ingest(cluster_name="hpc", raw=scontrol_text(busy, free))
    reconcile_all()

    body = api.get("/api/v1/placement/", {"cluster": "hpc", "gpus": 4}).json()
    assert body["fits"] and [n["node"] for n in body["nodes"]] == ["gpu002"]
    body = api.get("/api/v1/placement/", {"cluster": "hpc", "gpus": 11}).json()
    assert body["fits"] is False  # 2 free on gpu001 + 8 on gpu002
