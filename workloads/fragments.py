"""Fragmentation as a rule: plain numbers in, no ORM.

A node with some GPUs held and some free strands its free ones: they cannot take a job that
wants whole nodes (8 GPUs a node), and a smaller job placed there fragments it further. The
overview and `/metrics` count them the same way, with this one rule.
"""

from __future__ import annotations

from collections.abc import Iterable


def stranded_on_node(capacity: int, held: int) -> int:
    """The free GPUs of one node that are stranded: all of them when some are held and
    some free, none on an idle node (it takes a whole-node job) or a full one."""
    held = max(held, 0)
    free = capacity - held
    return free if held and free > 0 else 0


def stranded_gpus(nodes: Iterable[tuple[int, int]]) -> int:
    """Stranded GPUs over (GPU capacity, GPUs held) pairs, one per node."""
    return sum(stranded_on_node(capacity, held) for capacity, held in nodes)
