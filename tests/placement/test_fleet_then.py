"""The fleet as of a moment (`workload_verdicts.FleetThen`), swept once for a pass's moments
in time order, gives each moment the nodes a fresh count of the allocations held then gives:
every node's busy GPUs those other workloads held (`since <= moment < until`)."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace

from placement.selectors import AllocationRow
from placement.workload_verdicts import FleetThen

from .fleets import node


def counted_afresh(nodes, history, moment, exclude):
    """The one-moment reference: every allocation looked at once."""
    busy, counted = defaultdict(set), defaultdict(int)
    for a in history:
        if a.workload_id == exclude or a.node_id is None:
            continue
        if a.since > moment or (a.until is not None and a.until <= moment):
            continue
        if a.gpu_index is None:
            counted[a.node_id] += 1
        else:
            busy[a.node_id].add(a.gpu_index)
    return [
        replace(
            n,
            busy_indexes=None if counted.get(n.id) else set(busy.get(n.id, ())),
            whole_used=len(busy.get(n.id, ())) + counted.get(n.id, 0),
            shared_busy=set(),
            shared_used=0,
        )
        for n in nodes
    ]


def facts(nodes):
    return [(n.id, n.busy_indexes, n.whole_used, n.whole_free) for n in nodes]


def test_each_moment_matches_a_fresh_count_of_its_allocations():
    rng = random.Random(7)
    nodes = [node(f"n{i}", i + 1, cluster="hpc", kind="slurm", used=3) for i in range(6)]
    history = []
    for _ in range(120):
        since = rng.randrange(0, 50)
        until = rng.choice([None, since + rng.randrange(1, 20), since, since - 3])
        history.append(
            AllocationRow(
                workload_id=rng.randrange(1, 15),
                node_id=rng.choice([*(n.id for n in nodes), None]),
                node_name="",
                server_id=None,
                gpu_id=None,
                gpu_index=rng.choice([None, *range(8)]),
                model="",
                since=since,
                until=until,
            )
        )
    own = defaultdict(list)
    for a in history:
        own[a.workload_id].append(a)
    then = FleetThen(nodes, history)
    for moment, workload in sorted(
        (rng.randrange(-2, 75), rng.randrange(1, 16)) for _ in range(60)
    ):
        fresh = counted_afresh(nodes, history, moment, workload)
        swept = then.at(moment, cluster="hpc", own=own.get(workload, ()))
        assert facts(swept) == facts(fresh), (moment, workload)
