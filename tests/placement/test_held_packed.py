"""`selectors.held_gpus` read as one sum a node (`_held_packed`), the nodes it cannot tell
read again exactly (`_held_exact`): the same answers, one query when every node's rows hold
distinct indexes below `PACKED_BITS`, two otherwise, whatever the number of nodes."""

from __future__ import annotations

import pytest

from placement.facts import MASK_BITS
from placement.selectors import PACKED_BITS, _held_exact, _open_allocations, held_gpus
from tests.workloads.factory import workload
from workloads.models import Allocation

from .fleets import slurm_fleet, with_queries

pytestmark = pytest.mark.django_db


def read() -> tuple[dict, int]:
    return with_queries(held_gpus)


@pytest.mark.parametrize("nodes", [2, 6])
def test_distinct_indexes_are_one_query_and_the_exact_answer(nodes):
    names = [f"dgx-{i:02d}" for i in range(nodes)]
    slurm_fleet(names)
    for i, name in enumerate(names):
        workload(str(i), {name: [0, i % 8]} if i % 8 else {name: [7]})
    held, queries = read()
    assert queries == 1
    assert held == _held_exact(_open_allocations(None))
    ids = dict(Allocation.objects.values_list("node_name", "node_id").distinct())
    assert [held[ids[name]].indexes for name in names] == [
        {0, i % 8} if i % 8 else {7} for i in range(nodes)
    ]


@pytest.mark.parametrize("nodes", [3, 7])
def test_nodes_the_sum_cannot_tell_are_read_again_in_one_more_query(nodes):
    names = [f"dgx-{i:02d}" for i in range(nodes)]
    slurm_fleet(names)
    for i, name in enumerate(names[2:]):
        workload(f"plain-{i}", {name: [1, 2]})
    workload("twice-a", {names[0]: [3]})
    workload("twice-b", {names[0]: [3, 5]})  # index 3 held twice
    workload("past", {names[1]: [PACKED_BITS + 1]})  # no such GPU: the scheduler's index
    job = workload("counted", {names[1]: [4]})
    Allocation.objects.filter(workload=job).update(gpu=None, index=None)  # by count alone
    held, queries = read()
    assert queries == 2
    assert held == _held_exact(_open_allocations(None))
    ids = dict(Allocation.objects.values_list("node_name", "node_id").distinct())
    assert (held[ids[names[0]]].indexes, held[ids[names[0]]].held) == ({3, 5}, 2)
    past = held[ids[names[1]]]
    assert past.uncounted == 1 and past.indexes == {PACKED_BITS + 1} and past.held == 2
    assert PACKED_BITS + 1 < MASK_BITS  # an index the exact read keeps as a bit
