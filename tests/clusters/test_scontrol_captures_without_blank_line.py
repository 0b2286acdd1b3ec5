"""scontrol captures saved without scontrol's final blank line (issue 21, item 1), 64-bit
GRES counts (item 2) and CPUEfctv (item 4): whole records are taken, cut ones refused on
every path (the parser, the API, import_snapshot) with nothing stored."""

from __future__ import annotations

import re

import pytest
from django.core.management import CommandError, call_command

from clusters.models import ClusterSnapshot, Node
from clusters.parsers import SnapshotFormatError, parse_snapshot
from tests.fixtures.scheduler import fixture_path, fixture_text

NO_BLANK_LINE = {
    # fixture: (node names, how the text ends)
    "slurm-2205-scontrol-show-node-no-final-blank-line.txt": (
        ["a100-n01", "a100-n02", "a100-n03"],
        "ExtSensorsTemp=n/s",
    ),
    "slurm-2205-scontrol-show-node-drained-last-no-blank-line.txt": (
        ["a100-n01", "a100-n02"],
        "[admin@2025-02-10T10:02:44]\n",
    ),
    "slurm-2511-scontrol-show-node-d-no-final-blank-line.txt": (
        ["h200-r01", "h200-r02"],
        "CurrentWatts=0 AveWatts=0",
    ),
    "slurm-2505-scontrol-o-show-node-cloud-no-final-newline.txt": (
        ["g5g-1", "g5g-22"],
        "InstanceType=g5g.4xlarge",
    ),
}
V2511 = "slurm-2511-scontrol-show-node-d-no-final-blank-line.txt"
DRAINED = "slurm-2205-scontrol-show-node-drained-last-no-blank-line.txt"
NAME_2205 = "slurm-2205-scontrol-show-node-no-final-blank-line.txt"


@pytest.mark.parametrize("name", NO_BLANK_LINE)
def test_whole_captures_without_the_final_blank_line_are_taken(name):
    text = fixture_text(name)
    names, ending = NO_BLANK_LINE[name]
    assert text.endswith(ending) and not text.endswith("\n\n")  # the shape of the issue
    snapshot = parse_snapshot(text)
    assert [n.name for n in snapshot.nodes] == names
    # the same capture with scontrol's own ending says the same
    one_line = "\n" not in text.split("NodeName=")[1].strip()
    whole = text.rstrip("\n") + ("\n" if one_line else "\n\n")
    assert parse_snapshot(whole).nodes == snapshot.nodes


@pytest.mark.parametrize("name", NO_BLANK_LINE)
def test_every_prefix_of_a_capture_without_blank_line_is_refused_or_whole(name):
    text = fixture_text(name)
    whole = parse_snapshot(text).nodes
    counts = set()
    for cut in range(1, len(text) + 1):
        prefix = text[:cut]
        try:
            nodes = parse_snapshot(prefix).nodes
        except SnapshotFormatError:
            continue
        counts.add(len(nodes))
        assert nodes == whole[: len(nodes)], cut  # never a changed node
        assert len(re.findall(r"^NodeName=", prefix, re.MULTILINE)) == len(nodes), cut
    assert counts == set(range(1, len(whole) + 1))


@pytest.mark.parametrize(
    ("name", "cut_at", "why"),
    [
        # 22.05 (CapWatts= printed): the external sensors line closes the record
        (
            "slurm-2205-scontrol-show-node-no-final-blank-line.txt",
            lambda t: t[: t.rindex("   ExtSensorsJoules")],
            "it lacks ExtSensorsJoules, ExtSensorsTemp, ExtSensorsWatts, which the other",
        ),
        (
            "slurm-2205-scontrol-show-node-no-final-blank-line.txt",
            lambda t: t[:-1],  # ExtSensorsTemp=n/
            "ends inside its ExtSensorsTemp= value",
        ),
        # 25.11 (no CapWatts=, no sensors line): the power line closes it
        (V2511, lambda t: t[: t.rindex("   CurrentWatts")], "it lacks AveWatts, CurrentWatts"),
        (V2511, lambda t: t[: t.rindex(" AveWatts")], "it lacks AveWatts, which the other"),
        (V2511, lambda t: t + "\n   Reas", "holds no Key=Value field"),
        # a drained node's Reason line is printed after the last fields: lost without it
        (
            DRAINED,
            lambda t: t[: t.rindex("   Reason=")],
            "ends before its Reason= line, which scontrol prints after the last fields of a "
            "IDLE+DRAIN node",
        ),
        (DRAINED, lambda t: t[: t.rindex("[admin")], "ends inside its Reason"),
        (DRAINED, lambda t: t[: t.rindex("@")], "ends inside its Reason"),
        # one line per record (-o)
        (
            "slurm-2505-scontrol-o-show-node-cloud-no-final-newline.txt",
            lambda t: t[: t.rindex(" ExtSensorsTemp")],
            "it lacks ExtSensorsTemp, which the other records have",
        ),
        (
            "slurm-2505-scontrol-o-show-node-cloud-no-final-newline.txt",
            lambda t: t[: t.rindex(" ExtSensorsWatts") + 8],
            "it lacks ExtSensorsTemp, ExtSensorsWatts, which the other records have",
        ),
    ],
)
def test_a_record_cut_before_its_last_fields_is_refused(name, cut_at, why):
    text = cut_at(fixture_text(name))
    with pytest.raises(SnapshotFormatError, match=re.escape(why)):
        parse_snapshot(text)


@pytest.mark.parametrize(
    ("name", "cut_at", "why"),
    [
        # a lone record: nothing to compare with, so its version's layout decides
        (
            NAME_2205,
            lambda t: t[: t.rindex("   ExtSensorsJoules")],
            "ends before ExtSensorsJoules=, ExtSensorsWatts=, ExtSensorsTemp=, which the "
            "Slurm versions that print CapWatts= print last",
        ),
        (NAME_2205, lambda t: t[: t.rindex("   CurrentWatts")], "ends before its power line"),
        (V2511, lambda t: t[: t.rindex(" AveWatts")], "ends before its power line"),
        (V2511, lambda t: t[: t.rindex("   CfgTRES")], "ends before its power line"),
        (
            "slurm-2505-scontrol-o-show-node-cloud-no-final-newline.txt",
            lambda t: t[: t.rindex(" ExtSensorsWatts") + 8],
            "ends before ExtSensorsWatts=, ExtSensorsTemp=",
        ),
    ],
)
def test_a_lone_record_cut_before_the_last_fields_of_its_version_is_refused(name, cut_at, why):
    last = "NodeName=" + fixture_text(name).split("NodeName=")[-1]
    with pytest.raises(SnapshotFormatError, match=re.escape(why)):
        parse_snapshot(cut_at(last))
    assert len(parse_snapshot(last).nodes) == 1


def test_a_drained_node_without_reason_is_whole_when_scontrol_ended_it():
    text = fixture_text(DRAINED)
    no_reason = text[: text.rindex("   Reason=")].rstrip("\n")
    nodes = parse_snapshot(no_reason + "\n\n").nodes  # the blank line says it is whole
    assert nodes[-1].state_flags == ["drain"] and nodes[-1].reason is None
    with_reason = parse_snapshot(text).nodes[-1]
    assert with_reason.reason == "nvidia-smi hangs, ticket 8812"
    assert with_reason.reason_set_by == "admin"


def test_64_bit_gres_counts_and_effective_cpus_are_kept():
    first = parse_snapshot(fixture_text(V2511)).nodes[0]
    gres = {g["name"]: g for g in first.gres}
    assert gres["vmem"]["count"] == 2 * 1024**3 == 2147483648  # 2G is Slurm's 1024-based G
    assert gres["vmem"]["used"] == 0
    assert gres["mps"]["count"] == 400
    assert gres["gpu"]["count"] == 8 and gres["gpu"]["used"] == 3
    assert first.gpu_capacity == 8 and first.gpu_used == 3  # vmem and MPS are not GPUs
    assert (first.cpus, first.cpus_effective) == (192, 188)  # CoreSpecCount=2 x 2 threads
    assert first.slurm_version == "25.11.1"


@pytest.mark.parametrize(
    ("gres", "count"),
    [
        ("vmem:2G", 2 * 1024**3),
        ("vmem:3T", 3 * 1024**4),
        ("shard:h100:8P", 8 * 1024**5),
        ("mps:4294967296", 2**32),
    ],
)
def test_gres_count_suffixes_are_slurms_1024_based(gres, count):
    from clusters.parsers import parse_gres

    (record,) = parse_gres(gres)
    assert record.count == count


# -- every path: the API and import_snapshot -----------------------------------------------


@pytest.fixture
def post(staff, django_capture_on_commit_callbacks):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(staff)

    def post(name: str, body: str, query: str = ""):
        with django_capture_on_commit_callbacks(execute=True):
            return client.generic(
                "POST", f"/api/v1/clusters/{name}/snapshots/{query}", body, "text/plain"
            )

    post.client = client  # type: ignore[attr-defined]
    return post


@pytest.mark.django_db
def test_the_api_stores_a_capture_without_blank_line_with_its_64_bit_gres(post):
    response = post("h200", fixture_text(V2511))
    assert response.status_code == 201, response.content
    assert response.json()["nodes"] == 2
    node = Node.objects.get(name="h200-r01")
    assert {g["name"]: g["count"] for g in node.gres}["vmem"] == 2147483648
    assert (node.cpus, node.cpus_effective) == (192, 188)
    detail = post.client.get(f"/api/v1/nodes/{node.pk}/").json()
    assert detail["cpus_effective"] == 188 and detail["cpus"] == 192
    assert {g["name"]: g["count"] for g in detail["gres"]}["vmem"] == 2147483648


@pytest.mark.django_db
def test_the_node_page_shows_effective_cpus_beside_cpus(post, client, staff):
    post("h200", fixture_text(V2511))
    client.force_login(staff)
    node = Node.objects.get(name="h200-r01")
    page = client.get(f"/nodes/{node.pk}/").content.decode()
    assert "(188 effective, after CoreSpec)" in page


CUTS = [
    pytest.param(lambda t: t[: t.rindex("   ExtSensorsJoules")], id="2205-before-sensors"),
    pytest.param(lambda t: t[:-2], id="2205-inside-last-value"),
]


@pytest.mark.django_db
@pytest.mark.parametrize("cut_at", CUTS)
def test_a_cut_capture_is_a_400_on_the_api_and_stores_nothing(post, cut_at):
    text = fixture_text("slurm-2205-scontrol-show-node-no-final-blank-line.txt")
    assert post("a100", text).status_code == 201
    before = list(Node.objects.values_list("name", "gone_at", "last_seen"))
    snapshots = ClusterSnapshot.objects.count()
    response = post("a100", cut_at(text))
    assert response.status_code == 400, response.content
    assert "is cut short" in response.json()["errors"]["body"][0]
    assert list(Node.objects.values_list("name", "gone_at", "last_seen")) == before
    assert ClusterSnapshot.objects.count() == snapshots


@pytest.mark.django_db
@pytest.mark.parametrize("cut_at", CUTS)
def test_a_cut_capture_fails_import_snapshot_and_stores_nothing(tmp_path, cut_at):
    text = fixture_text("slurm-2205-scontrol-show-node-no-final-blank-line.txt")
    call_command("import_snapshot", "a100", str(fixture_path(NAME_2205)))
    before = list(Node.objects.values_list("name", "gone_at", "last_seen"))
    (tmp_path / "cut.txt").write_text(cut_at(text))
    with pytest.raises(CommandError, match="is cut short"):
        call_command("import_snapshot", "a100", str(tmp_path / "cut.txt"))
    assert list(Node.objects.values_list("name", "gone_at", "last_seen")) == before
    assert ClusterSnapshot.objects.count() == 1
