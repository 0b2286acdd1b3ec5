"""The GPUs held on a node as the bits of one integer (`facts.HeldOnNode`): pure, then as
`selectors.held_gpus` reads them (each index once, GPUs held by count alone, an index past
the bits)."""

from __future__ import annotations

import pytest

from placement.facts import MASK_BITS, HeldOnNode, mask_indexes
from placement.selectors import held_gpus
from tests.workloads.factory import workload
from workloads.models import Allocation

from .fleets import slurm_fleet


def test_a_mask_names_the_indexes_of_its_bits():
    assert mask_indexes(0) == set()
    assert mask_indexes(0b1011) == {0, 1, 3}
    assert mask_indexes(1 << (MASK_BITS - 1)) == {MASK_BITS - 1}


def test_held_counts_the_indexes_and_the_gpus_held_by_count_alone():
    on = HeldOnNode(0b110, 2)
    assert on.indexes == {1, 2} and on.held == 4
    beyond = HeldOnNode(0b1, 0, frozenset({MASK_BITS + 3}))
    assert beyond.indexes == {0, MASK_BITS + 3} and beyond.held == 2


def test_nodes_holding_alike_are_equal_keys():
    assert HeldOnNode(0b11, 0) == HeldOnNode(0b11, 0)
    assert len({HeldOnNode(0b11, 0), HeldOnNode(0b11, 0), HeldOnNode(0b11, 1)}) == 2


@pytest.mark.django_db
def test_held_gpus_reads_each_index_once_and_the_uncounted():
    slurm_fleet(["dgx-01", "dgx-02"])
    workload("1", {"dgx-01": [0, 3]})
    workload("2", {"dgx-01": [3]})  # the same GPU twice (a listing not yet applied)
    job = workload("3", {"dgx-02": [1]})
    Allocation.objects.filter(workload=job).update(gpu=None, index=None)  # by count alone
    workload("4", {"dgx-02": [MASK_BITS + 1]})  # no such GPU row: the scheduler's index
    held = {n: (on.indexes, on.uncounted, on.held) for n, on in held_gpus().items()}
    ids = dict(Allocation.objects.values_list("node_name", "node_id").distinct())
    assert held == {
        ids["dgx-01"]: ({0, 3}, 0, 2),
        ids["dgx-02"]: ({MASK_BITS + 1}, 1, 2),
    }
