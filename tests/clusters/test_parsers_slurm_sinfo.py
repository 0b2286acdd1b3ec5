"""Per-node sinfo listings: real captures from Debian's 22.05, header-less rows, states,
and the listings that cannot be a node set (aggregated, no GRES, values cut by -O)."""

from __future__ import annotations

import pytest

from clusters.parsers import SnapshotFormatError, parse_snapshot
from clusters.parsers.slurm_sinfo import WORKING_COMMANDS, parse_sinfo_text
from tests.fixtures.scheduler import fixture_path, fixture_text, sample_text

LIVE = "slurm-local-2205-sinfo-N-O-nodelist-partition-gres-gresused-statelong.txt"
STATES = "slurm-sinfo-ahNO-nodehost-gres-gresused-statelong-states.txt"


def by_name(snapshot):
    return {node.name: node for node in snapshot.nodes}


def test_a_live_per_node_listing_merges_the_rows_of_each_node():
    # sinfo -N -O NodeList,Partition,Gres,GresUsed,StateLong: two partitions, a job on 3 GPUs
    snapshot = parse_snapshot(fixture_path(LIVE).read_bytes())
    assert snapshot.format == "slurm-sinfo-text" and snapshot.kind == "slurm"
    nodes = by_name(snapshot)
    assert list(nodes) == ["gpu-node1", "gpu-node2", "gpu-node3", "gpu-node4"]
    assert nodes["gpu-node1"].partitions == ["gpu", "debug"]  # "gpu*": the default partition
    assert nodes["gpu-node3"].partitions == ["gpu"]
    assert [n.gpu_capacity for n in nodes.values()] == [8, 8, 8, 8]
    assert [n.gpu_used for n in nodes.values()] == [3, 0, 0, 0]
    assert nodes["gpu-node1"].gres[0]["used_indexes"] == "0-2"
    assert (nodes["gpu-node1"].state, nodes["gpu-node1"].schedulable) == ("mixed", True)
    assert (nodes["gpu-node3"].state, nodes["gpu-node3"].state_flags) == ("idle", ["drain"])
    assert not nodes["gpu-node3"].schedulable
    assert (nodes["gpu-node4"].state, nodes["gpu-node4"].ready) == ("down", False)


def test_the_o_form_with_cpus_and_memory_and_without_gres_used():
    nodes = by_name(parse_snapshot(fixture_text("slurm-local-2205-sinfo-N-o-N-P-G-T-c-m.txt")))
    node = nodes["gpu-node2"]
    assert (node.cpus, node.memory_bytes, node.partitions) == (2, 1000 * 2**20, ["gpu", "debug"])
    assert node.gpu_capacity == 8 and node.gpu_used is None  # no GresUsed column: unknown


def test_a_reason_with_spaces_in_the_middle_of_an_o_listing():
    text = fixture_text("slurm-local-2205-sinfo-N-o-sixteen-columns-reason-with-spaces.txt")
    nodes = by_name(parse_snapshot(text))
    assert nodes["gpu-node3"].reason == "test drain"
    assert nodes["gpu-node3"].hostname == "localhost" and nodes["gpu-node3"].addresses == [
        "localhost"
    ]
    assert nodes["gpu-node1"].reason is None and nodes["gpu-node1"].cpus == 2


def test_wide_o_fields_keep_long_gres_types_whole():
    nodes = by_name(
        parse_snapshot(fixture_text("slurm-local-2205-sinfo-N-O-wide-long-gres-type.txt"))
    )
    assert nodes["gpu-node1"].gpu_product == "nvlink_a100_40gb_sxm4"
    assert nodes["gpu-node1"].gpu_used == 3 and nodes["gpu-node1"].memory_bytes == 1000 * 2**20


def test_a_pipe_separated_listing():
    text = (
        "NODELIST|PARTITION|GRES|STATE\n"
        "n1|gpu*|gpu:a100:4(S:0)|idle\n"
        "n1|debug|gpu:a100:4(S:0)|idle\n"
    )
    (node,) = parse_snapshot(text).nodes
    assert (node.name, node.partitions, node.gpu_capacity) == ("n1", ["gpu", "debug"], 4)


def test_header_less_rows_are_read_by_content_and_states_mapped():
    nodes = by_name(parse_snapshot(fixture_text(STATES)))
    assert len(nodes) == 13  # dgx-a01 and dgx-a06 print twice (-a: one row per partition)
    expected = {
        "dgx-a01": ("allocated", [], True, True),
        "dgx-a02": ("idle", ["not_responding", "drain"], False, False),  # drained*
        "dgx-a03": ("allocated", ["completing"], True, True),
        "dgx-a04": ("idle", ["reserved"], True, True),
        "dgx-a05": ("idle", ["maintenance"], True, False),
        "dgx-a06": ("mixed", [], True, True),
        "dgx-a07": ("idle", ["planned"], True, True),
        "dgx-a08": ("idle", ["invalid"], True, False),
        "dgx-a09": ("idle", ["powered_down"], False, True),  # idle~: Slurm powers it up
        "dgx-a10": ("down", ["not_responding"], False, False),
        "dgx-a11": ("allocated", ["drain"], True, False),  # draining
    }
    for name, (state, flags, ready, schedulable) in expected.items():
        node = nodes[name]
        assert (node.state, node.state_flags, node.ready, node.schedulable) == (
            state,
            flags,
            ready,
            schedulable,
        ), name
    assert nodes["dgx-a01"].gpu_used == 8 and nodes["dgx-a03"].gpu_used == 2
    assert nodes["mig-b01"].mig_resources == {"1g.5gb": 7} and nodes["mig-b01"].gpu_used == 1
    assert nodes["cpu-c01"].gpu_capacity == 0 and nodes["dgx-a02"].raw_state == "drained*"


def test_header_less_columns_in_another_order():
    # sinfo -N -h -o "%P %n %G %T": the default partition's "*" marks that column
    text = "gpu* dgx-1 gpu:h100:8 idle\ndebug dgx-1 gpu:h100:8 idle\ngpu* dgx-2 gpu:h100:8 mix\n"
    nodes = by_name(parse_snapshot(text))
    assert list(nodes) == ["dgx-1", "dgx-2"]
    assert nodes["dgx-1"].partitions == ["gpu", "debug"] and nodes["dgx-2"].state == "mixed"


def test_sinfo_n_h_o_n_g():
    text = "dgx-01 gpu:h100:8(S:0-1)\ndgx-02 gpu:h100:4(S:0),gpu:1g.10gb:7(S:1)\n"
    nodes = by_name(parse_snapshot(text))
    assert [n.gpu_capacity for n in nodes.values()] == [8, 11]
    assert nodes["dgx-02"].gpu_used is None and nodes["dgx-02"].state == "unknown"


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("slurm-local-2205-sinfo-o-D-P-G-T-aggregated.txt", "no NODELIST or HOSTNAMES"),
        ("slurm-local-2205-sinfo-N-l.txt", "no GRES column"),
    ],
)
def test_listings_that_cannot_be_a_node_set_name_the_commands_that_can(name, why):
    with pytest.raises(SnapshotFormatError, match=why) as caught:
        parse_snapshot(fixture_text(name))
    assert WORKING_COMMANDS in str(caught.value)


def test_the_real_aggregated_listing_is_refused_naming_the_commands_that_work():
    text = sample_text("slurm-sinfo-partitions-gres-2511-a100-a800-dgx2-mig-sckyzo.txt")
    with pytest.raises(SnapshotFormatError, match="counts nodes, as %D prints") as caught:
        parse_snapshot(text)
    assert WORKING_COMMANDS in str(caught.value)


@pytest.mark.parametrize(
    "text",
    [
        "NODELIST GRES\ngpu[1-4] gpu:h100:8\n",  # without -N: hostlist ranges
        "NODELIST NODES GRES\ngpu1 2 gpu:h100:8\n",
    ],
)
def test_rows_that_stand_for_several_nodes_are_refused(text):
    with pytest.raises(SnapshotFormatError, match="aggregates nodes"):
        parse_sinfo_text(text)


def test_values_cut_at_the_o_field_width_are_refused():
    # a real 22.05 capture: "gpu:nvlink_a100_40gb_sxm4:8" cut at 20 characters and glued
    with pytest.raises(SnapshotFormatError, match="GRES value fills its 20-character field"):
        parse_snapshot(fixture_text("slurm-local-2205-sinfo-N-O-gres-cut-at-20.txt"))
    with pytest.raises(
        SnapshotFormatError, match="line 1: a value fills its 20-character field \\(column 2\\)"
    ):
        parse_snapshot(fixture_text("slurm-local-2205-sinfo-ahNO-glued-at-20.txt"))


@pytest.mark.parametrize("name", [LIVE, STATES, "slurm-local-2205-sinfo-N-o-N-P-G-T-c-m.txt"])
def test_every_prefix_is_refused_or_whole_rows(name):
    """A listing cut anywhere but between rows is refused; cut between rows, it is the
    first rows' nodes (the boundary case no text format can tell)."""
    data = fixture_text(name)
    whole = by_name(parse_snapshot(data))
    for cut in range(1, len(data)):
        prefix = data[:cut]
        try:
            nodes = by_name(parse_snapshot(prefix))
        except SnapshotFormatError:
            continue
        assert prefix.endswith("\n"), cut
        for node_name, node in nodes.items():
            rows_seen = prefix.count(f"{node_name} ")
            if rows_seen == data.count(f"{node_name} "):
                assert node == whole[node_name], (cut, node_name)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("NODELIST GRES STATE\n", "no rows"),
        ("n1 idle\nn2 idle\n", "unrecognised"),
        ("gpu:h100:8 idle\ngpu:h100:8 mix\n", "no node name column can be recognised"),
        ("gpu* n1 gpu:h100:8 idle\ngpu n1 gpu:h100:8\n", "line 2 has 3 values where line 1"),
        ("NODELIST GRES STATE\nn1 gpu:h100:8\n", "2 values for 3 columns"),
        ("NODELIST GRES\nn1 gpu:h1\n", "not a GRES string"),
        ("NODELIST GRES\nn1 gpu:h100:8\nn1 gpu:h100:4\n", "different GRES"),
        ("NODELIST GRES\nn1 gpu:h100:8", "does not end with the newline"),
    ],
)
def test_broken_listings_are_refused(text, why):
    with pytest.raises(SnapshotFormatError, match=why):
        parse_snapshot(text)
