"""Choosing GPUs inside one node: the set whose worst pair link is best.

NV# > PIX > PXB > PHB > NODE > SYS, then one NUMA node, then GPUs with a NIC at PIX distance.
Every combination is tried up to BRUTE_FORCE_LIMIT subsets; beyond it, a greedy growth.
Pure functions over the GPUs of one server and a pair-class lookup.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from inventory.choices import link_rank, worst_link_class

__all__ = ["worst_link_class"]  # re-exported: the rule lives in inventory.choices

UNKNOWN_RANK = 100
"""A GPU set whose interconnect is not known ranks after every known link class."""
NO_PAIRS_RANK = -1000
"""One GPU has no pairs: its interconnect never makes a node worse than another."""
BRUTE_FORCE_LIMIT = 3000
"""Most GPU subsets tried exactly (C(8,4) = 70, C(16,8) = 12,870); beyond it, greedy."""


@dataclass(slots=True)
class FleetGpu:
    """A GPU of a node's server. `problem` is its most serious `GpuProblem` (None: healthy);
    `action` the type of its most serious open health finding (None: no action needed,
    `health.selectors`). Placement skips a GPU with either."""

    id: int
    index: int
    name: str
    memory_bytes: int | None
    numa_node: int | None
    mig: bool
    problem: str | None
    action: str | None = None

    @property
    def usable(self) -> bool:
        return self.problem is None and self.action is None


class SetRank(NamedTuple):
    """How good a set of GPUs is; lower is better, field by field."""

    link_rank: int
    """The worst pair link's rank (NO_PAIRS_RANK for one GPU, UNKNOWN_RANK when not known)."""
    numa_nodes: int
    nic_missing: int
    """GPUs of the set without a NIC at PIX distance."""
    link_total: int
    """The sum of every pair's rank: between equal worst links, the better wired set."""
    indexes: tuple[int, ...]


@dataclass(frozen=True)
class GpuSet:
    """A set of GPUs of one server and why it ranks where it does."""

    gpus: tuple[FleetGpu, ...]
    link_class: str | None
    rank: SetRank


def set_rank(
    gpus: Sequence[FleetGpu],
    pair_class: Callable[[int, int], str | None],
    nic_gpus: set[int] | frozenset[int],
) -> tuple[SetRank, str | None]:
    """The set's rank and its worst link class (None when a pair's class is unknown)."""
    classes: list[str | None] = [pair_class(a.id, b.id) for a, b in itertools.combinations(gpus, 2)]
    if not classes:
        rank, worst, total = NO_PAIRS_RANK, None, 0
    elif any(c is None for c in classes):
        rank, worst, total = UNKNOWN_RANK, None, UNKNOWN_RANK * len(classes)
    else:
        known = [c for c in classes if c is not None]
        worst = worst_link_class(known)
        rank = link_rank(worst or "")
        total = sum(link_rank(c) for c in known)
    numa = len({g.numa_node for g in gpus})
    nic_missing = sum(1 for g in gpus if g.id not in nic_gpus)
    return SetRank(rank, numa, nic_missing, total, tuple(g.index for g in gpus)), worst


def _valid(gpu_set: GpuSet, m: int, nvlink_only: bool, same_numa: bool) -> bool:
    if nvlink_only and m > 1 and not (gpu_set.link_class or "").startswith("NV"):
        return False
    split = gpu_set.rank.numa_nodes > 1 or any(g.numa_node is None for g in gpu_set.gpus)
    return not (same_numa and split)


def best_gpu_set(
    gpus: Sequence[FleetGpu],
    m: int,
    pair_class: Callable[[int, int], str | None],
    *,
    nvlink_only: bool = False,
    same_numa: bool = False,
    nic_gpus: set[int] | frozenset[int] = frozenset(),
    uniform: bool = False,
) -> GpuSet | None:
    """The m GPUs whose worst pair link is best, then fewest NUMA nodes, then NIC at PIX.

    Exhaustive up to BRUTE_FORCE_LIMIT subsets (an 8-GPU server: at most 70), greedy beyond.
    `uniform` says every pair has the same class, so only NUMA and NICs decide (no search).
    None when no set of m satisfies nvlink_only / same_numa.
    """
    if m <= 0 or m > len(gpus):
        return None
    nic = set(nic_gpus)
    if uniform:
        chosen = _numa_pack(gpus, m, nic)
    elif math.comb(len(gpus), m) <= BRUTE_FORCE_LIMIT:
        best: SetRank | None = None
        chosen = ()
        for subset in itertools.combinations(gpus, m):
            rank, worst = set_rank(subset, pair_class, nic)
            candidate = GpuSet(subset, worst, rank)
            if not _valid(candidate, m, nvlink_only, same_numa):
                continue
            if best is None or rank < best:
                best, chosen = rank, subset
        if best is None:
            return None
    else:
        chosen = _greedy(gpus, m, pair_class, nic, same_numa)
    rank, worst = set_rank(chosen, pair_class, nic)
    result = GpuSet(tuple(chosen), worst, rank)
    return result if _valid(result, m, nvlink_only, same_numa) else None


def _numa_pack(gpus: Sequence[FleetGpu], m: int, nic: set[int]) -> tuple[FleetGpu, ...]:
    """m GPUs on as few NUMA nodes as possible, the tightest-fitting NUMA node first."""
    groups: dict[int | None, list[FleetGpu]] = defaultdict(list)
    for g in gpus:
        groups[g.numa_node].append(g)
    for members in groups.values():
        members.sort(key=lambda g: (g.id not in nic, g.index))
    fitting = [k for k, v in groups.items() if len(v) >= m and k is not None]
    if fitting:
        best = min(fitting, key=lambda k: (len(groups[k]), k))
        return tuple(groups[best][:m])
    chosen: list[FleetGpu] = []
    for key in sorted(groups, key=lambda k: (-len(groups[k]), k is None, k or 0)):
        chosen.extend(groups[key][: m - len(chosen)])
        if len(chosen) == m:
            break
    return tuple(sorted(chosen, key=lambda g: g.index))


def _greedy(
    gpus: Sequence[FleetGpu],
    m: int,
    pair_class: Callable[[int, int], str | None],
    nic: set[int],
    same_numa: bool,
) -> tuple[FleetGpu, ...]:
    """Grow a set from every seed GPU, adding the GPU whose worst link to the set is best."""

    def rank(a: FleetGpu, b: FleetGpu) -> int:
        c = pair_class(a.id, b.id)
        return UNKNOWN_RANK if c is None else link_rank(c)

    best: tuple | None = None
    best_set: tuple[FleetGpu, ...] = tuple(gpus[:m])
    for seed in gpus:
        chosen = [seed]
        rest = [
            g for g in gpus if g is not seed and (not same_numa or g.numa_node == seed.numa_node)
        ]
        while len(chosen) < m and rest:
            pick = min(
                rest,
                key=lambda g: (
                    max(rank(g, c) for c in chosen),
                    g.numa_node != seed.numa_node,
                    g.id not in nic,
                    g.index,
                ),
            )
            chosen.append(pick)
            rest.remove(pick)
        if len(chosen) < m:
            continue
        grown, _ = set_rank(chosen, pair_class, nic)
        if best is None or grown < best:
            best, best_set = grown, tuple(sorted(chosen, key=lambda g: g.index))
    return best_set
