"""GRES strings and node states, the pieces every Slurm format shares."""

from __future__ import annotations

import pytest

from clusters.parsers import expand_hostlist, parse_gres
from clusters.parsers.slurm_common import combine_gres, gpu_figures, parse_state, readiness
from tests.fixtures.scheduler import sample_text

PRODUCTION_SINFO = "slurm-sinfo-partitions-gres-2511-a100-a800-dgx2-mig-sckyzo.txt"


def _rows():
    """(nodes, partition, Gres, GresUsed) rows of the real production sinfo capture."""
    return [line.split() for line in sample_text(PRODUCTION_SINFO).splitlines() if line.strip()]


def test_every_gres_of_a_real_production_cluster_parses():
    rows = _rows()
    assert len(rows) == 13
    totals = {}
    for _nodes, partition, gres, used in rows:
        records = combine_gres(gres, used, used_known=True)
        figures = gpu_figures(records, used_known=True)
        totals.setdefault(partition, []).append((figures["gpu_capacity"], figures["gpu_used"]))
        for record in records:
            assert record.used is not None and record.used <= record.count
    assert totals["a100"][0] == (4, 1)
    assert totals["a100"][2] == (3, 2)  # IDX:0,2
    assert totals["cpu"] == [(0, 0)]  # (null) (null)
    assert totals["dgx2"] == [(16, 16), (16, 13)]  # IDX:0-3,5-7,9-11,13-15 has commas


def test_autodetected_mig_type_is_a_mig_profile_with_its_parent_product():
    _nodes, _partition, gres, used = next(r for r in _rows() if r[1] == "debuga100")
    records = combine_gres(gres, used, used_known=True)
    (mig,) = records
    assert (mig.type, mig.count, mig.used, mig.mig_profile) == (
        "nvidia_a100_1g.5gb",
        21,
        0,
        "1g.5gb",
    )
    figures = gpu_figures(records, used_known=True)
    assert figures["gpu_capacity"] == 21
    assert figures["mig_resources"] == {"1g.5gb": 21}
    assert figures["gpu_product"] == "nvidia_a100"


def test_admin_chosen_type_names_are_kept_as_written():
    _nodes, _partition, gres, _used = _rows()[0]
    (record,) = parse_gres(gres)
    assert record.type == "NVlink_A100_40GB"
    assert record.mig_profile is None


@pytest.mark.parametrize(
    ("gres", "capacity"),
    [
        ("gpu:h100:2,gpu:h200:4", 6),  # the contract's own example
        ("gpu:8", 8),
        ("gpu", 1),
        ("gpu:h100:8(S:0-1)", 8),
        ("gpu:h100:4(S:0),gpu:h100:4(S:1)", 8),  # one entry per socket
        ("gpu:1g.10gb:7,gpu:h100:7", 14),
        ("gpu:a100:1,gpu:a100_3g.20gb:2", 3),  # SchedMD's MIG slurm.conf example
        ("gpu:tesla_v100-sxm3-32gb:16,shard:tesla_v100-sxm3-32gb:64", 16),
        ("mps:400,gpu:p6000:2", 2),
        ("(null)", 0),
        ("", 0),
        ("N/A", 0),
    ],
)
def test_gpu_capacity_sums_every_gpu_gres(gres, capacity):
    assert gpu_figures(parse_gres(gres), used_known=False)["gpu_capacity"] == capacity


def test_schedmd_mig_example_names_its_profile():
    line = sample_text("slurm-conf-mig-nodename-schedmd-doc.txt").splitlines()[-1]
    gres = line.split("gres=", 1)[1]
    records = parse_gres(gres)
    assert [(r.type, r.count, r.mig_profile) for r in records] == [
        ("a100", 1, None),
        ("a100_3g.20gb", 2, "3g.20gb"),
    ]


def test_count_suffixes_are_powers_of_1024():
    (record,) = parse_gres("bandwidth:lustre:4G")
    assert record.count == 4 * 1024**3


def test_gres_used_for_an_untyped_gpu_matches_the_untyped_total():
    (record,) = combine_gres("gpu:4", "gpu:(null):2(IDX:0-1)", used_known=True)
    assert (record.count, record.used, record.used_indexes) == (4, 2, "0-1")


def test_gres_used_unknown_stays_none():
    records = combine_gres("gpu:h100:8", None, used_known=False)
    assert gpu_figures(records, used_known=False)["gpu_used"] is None


@pytest.mark.parametrize(
    ("state", "flags", "base", "out_flags", "ready", "schedulable"),
    [
        ("IDLE", (), "idle", [], True, True),
        ("IDLE+DRAIN", (), "idle", ["drain"], True, False),
        ("MIXED+DRAIN", (), "mixed", ["drain"], True, False),
        ("DOWN*", (), "down", ["not_responding"], False, False),
        ("IDLE*", (), "idle", ["not_responding"], False, False),
        ("DOWN+DRAIN+NOT_RESPONDING", (), "down", ["drain", "not_responding"], False, False),
        ("IDLE+CLOUD+POWERED_DOWN", (), "idle", ["cloud", "powered_down"], False, True),
        ("IDLE~", (), "idle", ["powered_down"], False, True),
        ("ALLOCATED+COMPLETING", (), "allocated", ["completing"], True, True),
        ("IDLE+MAINT", (), "idle", ["maintenance"], True, False),
        ("FUTURE", (), "future", [], False, False),
        ("idle", ("DRAIN",), "idle", ["drain"], True, False),  # v0.0.38 JSON
        (["IDLE", "DRAIN"], (), "idle", ["drain"], True, False),  # v0.0.39+ JSON
        (["MIXED", "FAIL"], (), "mixed", ["fail"], True, False),
        ("drained", (), "idle", ["drain"], True, False),  # sinfo's long name
        ("", (), "unknown", [], False, False),
    ],
)
def test_states_normalise_to_base_and_flags(state, flags, base, out_flags, ready, schedulable):
    got_base, got_flags, _raw = parse_state(state, flags)
    assert (got_base, got_flags) == (base, out_flags)
    assert readiness(got_base, got_flags) == (ready, schedulable)


def test_hostlists_expand_with_padding_and_lists():
    assert expand_hostlist("gpu-node[1-3,7],cpu01") == [
        "gpu-node1",
        "gpu-node2",
        "gpu-node3",
        "gpu-node7",
        "cpu01",
    ]
    assert expand_hostlist("cpu-[0001-0002]") == ["cpu-0001", "cpu-0002"]
    assert expand_hostlist("odd[a-b]") == ["odd[a-b]"]
