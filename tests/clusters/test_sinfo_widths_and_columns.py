"""Per-node sinfo listings (issue 21, items 3 and 6d): each -O field is checked against its
own width, Slurm's state flags are not cuts, and header-less columns are told apart by
content; what stays ambiguous is a 400 on every path, with nothing stored."""

from __future__ import annotations

import re

import pytest
from django.core.management import CommandError, call_command

from clusters.models import Cluster, ClusterSnapshot, Node
from clusters.parsers import SnapshotFormatError, parse_snapshot
from tests.fixtures.scheduler import fixture_path, fixture_text

WIDE = "slurm-sinfo-NhO-20-240-240-20-long-gres-state-flags.txt"
NO_DEFAULT = "slurm-sinfo-Nh-o-N-P-G-T-no-default-partition.txt"


def by_name(text: str):
    return {n.name: n for n in parse_snapshot(text).nodes}


def test_wide_o_fields_are_each_checked_against_their_own_width():
    text = fixture_text(WIDE)
    starts = {m.start() for line in text.splitlines() for m in re.finditer(r"\S+", line)}
    assert starts == {0, 20, 260, 500}  # 20/240/240/20, every start a multiple of 20
    assert max(len(v) for v in text.split()) > 20  # values longer than 20, none cut
    nodes = by_name(text)
    assert list(nodes) == ["dgx-h01", "dgx-h02", "dgx-h03", "dgx-h04", "mig-a01"]
    h01 = nodes["dgx-h01"]
    assert (
        h01.gpu_capacity == 8 and h01.gpu_used == 8 and h01.gpu_product == "nvidia_h100_80gb_hbm3"
    )
    assert {g["name"]: g["count"] for g in h01.gres} == {"gpu": 8, "shard": 64}
    assert nodes["mig-a01"].mig_resources == {"1g.5gb": 7} and nodes["mig-a01"].gpu_used == 2


@pytest.mark.parametrize(
    ("node", "state", "flags", "schedulable"),
    [
        ("dgx-h02", "mixed", ["planned"], True),  # mixed-
        ("dgx-h03", "allocated", ["drain", "reboot_requested"], False),  # draining@
        ("dgx-h04", "idle", ["drain", "not_responding"], False),  # drained*
        ("mig-a01", "idle", ["powered_down"], True),  # idle~
    ],
)
def test_state_flag_suffixes_are_slurms_not_cuts(node, state, flags, schedulable):
    record = by_name(fixture_text(WIDE))[node]
    assert (record.state, sorted(record.state_flags), record.schedulable) == (
        state,
        flags,
        schedulable,
    )


def _replace_field(text: str, line: int, start: int, width: int, value: str) -> str:
    lines = text.split("\n")
    row = lines[line]
    lines[line] = row[:start] + value[:width].ljust(width) + row[start + width :]
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("start", "width", "value", "column"),
    [
        # a GRES longer than its 240 characters, cut at the width and glued to GresUsed
        (20, 240, "gpu:nvidia_h100_80gb_hbm3:8(S:0-1)," + "shard:x:1," * 30, 2),
        # a node name that fills its 20 characters
        (0, 20, "dgx-h01.cluster.example.org", 1),
        # a state that fills the last 20-character field
        (500, 20, "mixed+drain+not_responding", 4),
    ],
)
def test_a_value_that_fills_its_own_field_is_refused(start, width, value, column):
    text = _replace_field(fixture_text(WIDE), 1, start, width, value)
    with pytest.raises(SnapshotFormatError, match=f"line 2: a value fills its {width}-character "):
        parse_snapshot(text)
    with pytest.raises(SnapshotFormatError, match=rf"\(column {column}\)"):
        parse_snapshot(text)


def test_a_wide_listing_cut_inside_a_row_is_refused():
    text = fixture_text(WIDE)
    with pytest.raises(SnapshotFormatError):
        parse_snapshot(text[: text.index("draining@") + 4])
    cut_at_line_end = "".join(text.splitlines(keepends=True)[:2])
    assert list(by_name(cut_at_line_end)) == ["dgx-h01", "dgx-h02"]


# -- header-less columns: node names and partitions by content ------------------------------


def test_a_listing_without_default_partition_keeps_nodes_and_partitions_apart():
    nodes = by_name(fixture_text(NO_DEFAULT))
    assert list(nodes) == ["dgx-h01", "dgx-h02", "dgx-h03"]
    assert nodes["dgx-h01"].partitions == ["batch", "debug", "long"]
    assert [n.state for n in nodes.values()] == ["mixed", "idle", "idle"]


@pytest.mark.parametrize("lines", [1, 2, 3])
def test_a_listing_cut_at_a_line_end_to_one_node_is_not_swapped(lines):
    # one node in three partitions: the partition column has more distinct values; the
    # node's names carry digits where the partitions' do not
    text = "".join(fixture_text(NO_DEFAULT).splitlines(keepends=True)[:lines])
    nodes = by_name(text)
    assert list(nodes) == ["dgx-h01"]
    assert nodes["dgx-h01"].partitions == ["batch", "debug", "long"][:lines]


def test_the_node_column_is_the_one_whose_rows_agree_on_the_node_facts():
    # both columns' names carry digits; only one groups rows of one state and GRES
    text = (
        "h100q1 dgx01 gpu:h100:8 mixed\n"
        "h100q1 dgx02 gpu:h100:4 idle\n"
        "h100q2 dgx01 gpu:h100:8 mixed\n"
        "h100q2 dgx02 gpu:h100:4 idle\n"
    )
    nodes = by_name(text)
    assert list(nodes) == ["dgx01", "dgx02"]
    assert nodes["dgx01"].partitions == ["h100q1", "h100q2"] and nodes["dgx02"].gpu_capacity == 4


AMBIGUOUS = [
    # one node in two partitions, every name with digits: either column could be the nodes
    "dgx01 h100q1 gpu:h100:8 idle\ndgx01 h100q2 gpu:h100:8 idle\n",
    # no digits anywhere
    "login gpu gpu:h100:8 idle\nlogin debug gpu:h100:8 idle\n",
]


@pytest.mark.parametrize("text", AMBIGUOUS)
def test_what_stays_ambiguous_is_refused_naming_why(text):
    with pytest.raises(SnapshotFormatError, match="could each be the node names or the partit"):
        parse_snapshot(text)


def test_a_header_makes_the_same_listing_exact():
    text = "NODELIST PARTITION GRES STATE\n" + AMBIGUOUS[0]
    (node,) = parse_snapshot(text).nodes
    assert node.name == "dgx01" and node.partitions == ["h100q1", "h100q2"]


# -- every path -------------------------------------------------------------------------------


@pytest.fixture
def post(staff, django_capture_on_commit_callbacks):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(staff)

    def post(name: str, body: str):
        with django_capture_on_commit_callbacks(execute=True):
            return client.generic("POST", f"/api/v1/clusters/{name}/snapshots/", body, "text/plain")

    return post


@pytest.mark.django_db
def test_the_api_stores_a_cut_header_less_listing_on_a_new_cluster_unswapped(post):
    text = "".join(fixture_text(NO_DEFAULT).splitlines(keepends=True)[:3])
    response = post("new", text)
    assert response.status_code == 201, response.content
    (node,) = Node.objects.filter(cluster__name="new")
    assert node.name == "dgx-h01" and node.partitions == ["batch", "debug", "long"]


@pytest.mark.django_db
@pytest.mark.parametrize("text", AMBIGUOUS)
def test_an_ambiguous_listing_is_a_400_and_creates_nothing(post, text):
    response = post("new", text)
    assert response.status_code == 400
    assert "could each be the node names" in response.json()["errors"]["body"][0]
    assert not Cluster.objects.exists() and not Node.objects.exists()
    assert not ClusterSnapshot.objects.exists()


@pytest.mark.django_db
def test_a_value_filling_its_field_is_a_400_and_keeps_the_node_set(post):
    assert post("wide", fixture_text(WIDE)).status_code == 201
    before = sorted(Node.objects.values_list("name", "gres", "gone_at"))
    text = _replace_field(fixture_text(WIDE), 1, 20, 240, "gpu:h100:8," + "shard:x:1," * 30)
    response = post("wide", text)
    assert response.status_code == 400
    assert "fills its 240-character field" in response.json()["errors"]["body"][0]
    assert sorted(Node.objects.values_list("name", "gres", "gone_at")) == before


@pytest.mark.django_db
@pytest.mark.parametrize("text", AMBIGUOUS)
def test_import_snapshot_refuses_an_ambiguous_listing_and_stores_nothing(tmp_path, text):
    (tmp_path / "listing.txt").write_text(text)
    with pytest.raises(CommandError, match="could each be the node names"):
        call_command("import_snapshot", "new", str(tmp_path / "listing.txt"))
    assert not Cluster.objects.exists() and not ClusterSnapshot.objects.exists()
    call_command("import_snapshot", "wide", str(fixture_path(WIDE)))
    assert Node.objects.filter(cluster__name="wide").count() == 5
