"""Where the nodes of a multi-node job sit on the network: one leaf, one spine group, one NVLink
domain. Pure: places in, a choice and its words out; no queries.

A job on several nodes talks over the fabric, so the nodes chosen should be close: under one
leaf switch (in a rail-optimised fabric, one leaf group: the rail leaves of one scalable unit,
where NIC k of every server meets NIC k of the others on leaf k), else on as few leaves as
possible under one spine group (leaves that reach each other through the spines alone), else in
one NVLink domain (GB200 NVL72: servers whose GPUs share a fabric `cluster_uuid`/`clique_id`).
Ties go to the scheduler ranking the planner already made (`positions`: best first).

Hops count the switches a message crosses between two nodes: 1 under one leaf, 3 through a
spine (leaf, spine, leaf), 5 through a core; unknown (None) when a node is on no known fabric.
The places and the hop rule live in `fabric.places` (workloads judge by them too); re-exported.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from fabric.places import NOWHERE, Place, between, hops_between, span_hops

__all__ = ["NOWHERE", "Place", "between", "hops_between", "span_hops"]

T = TypeVar("T")


LEVELS: tuple[tuple[str, str, int | None], ...] = (
    ("leaf", "under one leaf switch", 1),
    ("spine", "under one spine group", 3),
    ("nvlink", "in one NVLink domain", None),
)
"""Where nodes may share, closest first: the `Place` attribute, the words, the hops."""


@dataclass(frozen=True, slots=True)
class Locality:
    """How close the nodes chosen are, and why they were chosen, in words."""

    nodes: int
    leaves: int
    spine_groups: int
    nvlink_domains: int
    hops: int | None
    why: str


def describe(places: Sequence[Place], why: str = "") -> Locality:
    """The locality of a set of chosen servers' places."""
    known = [p for p in places if p.leaf is not None]
    return Locality(
        nodes=len(places),
        leaves=len({p.leaf for p in known}),
        spine_groups=len({p.spine for p in known if p.spine is not None}),
        nvlink_domains=len({p.nvlink for p in places if p.nvlink is not None}),
        hops=span_hops(places),
        why=why,
    )


def choose_local(
    ranked: Sequence[T], count: int, place_of: Callable[[T], Place]
) -> tuple[list[T], Locality]:
    """`count` items of `ranked` (best first), as close on the network as they can be.

    One leaf first (the leaf whose best `count` rank best), then one spine group on the fewest
    leaves, then one NVLink domain; else the first `count` as ranked. Fewer than `count` items:
    all of them.
    """
    position = {id(item): i for i, item in enumerate(ranked)}
    places = {id(item): place_of(item) for item in ranked}
    if count <= 1 or len(ranked) <= count:
        chosen = list(ranked[:count])
        return chosen, locality_of([places[id(c)] for c in chosen], count)
    by_leaf: dict[str, list[T]] = defaultdict(list)
    by_spine: dict[str, list[T]] = defaultdict(list)
    by_nvlink: dict[str, list[T]] = defaultdict(list)
    for item in ranked:
        place = places[id(item)]
        if place.leaf is not None:
            by_leaf[place.leaf].append(item)
        if place.spine is not None:
            by_spine[place.spine].append(item)
        if place.nvlink is not None:
            by_nvlink[place.nvlink].append(item)

    def cost(items: list[T]) -> int:
        return sum(position[id(i)] for i in items)

    def chosen_places(items: list[T]) -> list[Place]:
        return [places[id(i)] for i in items]

    leaf_fits = [items[:count] for items in by_leaf.values() if len(items) >= count]
    if leaf_fits:
        best = min(leaf_fits, key=lambda items: (cost(items), _nvlink_spread(chosen_places(items))))
        place = places[id(best[0])]
        return best, describe(
            chosen_places(best),
            f"all {count} nodes under one leaf switch ({place.leaf_name or place.leaf}): "
            + between(1),
        )
    spine_fits: list[tuple[int, int, list[T]]] = []
    for items in by_spine.values():
        if len(items) < count:
            continue
        leaves: dict[str, list[T]] = defaultdict(list)
        for item in items:
            leaves[places[id(item)].leaf or ""].append(item)
        # the fewest leaves: the fullest first (ties: the best ranked)
        order = sorted(leaves.values(), key=lambda group: (-len(group), cost(group[:1])))
        taken: list[T] = []
        used = 0
        for group in order:
            taken.extend(group[: count - len(taken)])
            used += 1
            if len(taken) >= count:
                break
        taken.sort(key=lambda i: position[id(i)])
        spine_fits.append((used, cost(taken), taken))
    if spine_fits:
        used, _, best = min(spine_fits, key=lambda fit: (fit[0], fit[1]))
        place = places[id(best[0])]
        return best, describe(
            chosen_places(best),
            f"no leaf has {count} nodes that fit; {used} leaves under one spine group "
            f"({place.spine_name or place.spine}): {between(3)}",
        )
    domain_fits = [items[:count] for items in by_nvlink.values() if len(items) >= count]
    if domain_fits:
        best = min(domain_fits, key=cost)
        return best, describe(
            chosen_places(best),
            f"no spine group has {count} nodes that fit; all {count} in one NVLink domain",
        )
    chosen = list(ranked[:count])
    return chosen, locality_of(chosen_places(chosen), count)


def largest_group(places: Iterable[Place]) -> int:
    """The most servers one leaf, one spine group or one NVLink domain holds: a job on more
    nodes than that is close nowhere (`choose_local` would take the first as ranked)."""
    places = list(places)
    alike = Counter(map(id, places))  # servers share places (`leaves.places_from`)
    distinct = {id(p): p for p in places}
    largest = 0
    for attribute, _words, _hops in LEVELS:
        counts: Counter[str | None] = Counter()
        for key, n in alike.items():
            counts[getattr(distinct[key], attribute)] += n
        counts.pop(None, None)
        largest = max(largest, max(counts.values(), default=0))
    return largest


def _nvlink_spread(places: list[Place]) -> int:
    return len({p.nvlink for p in places})


def locality_of(places: list[Place], count: int) -> Locality:
    """The locality of the best ranked, in words that say what they share."""
    found = describe(places)
    if count <= 1 or found.nodes <= 1:
        words = ""
    elif found.hops is None:
        words = "the fabric of these nodes is not known: the best ranked"
    elif found.hops == 1:
        words = f"all {found.nodes} nodes under one leaf switch: {between(1)}"
    elif found.hops == 3:
        words = f"{found.nodes} nodes on {found.leaves} leaves under one spine group: {between(3)}"
    elif found.nvlink_domains == 1 and all(p.nvlink for p in places):
        words = f"all {found.nodes} nodes in one NVLink domain"
    else:
        words = (
            f"no leaf, spine group or NVLink domain holds {count} nodes that fit: the best "
            f"ranked, {found.hops} switches apart"
        )
    return replace(found, why=words)
