"""The most switches between two of a job's servers, worked out in one pass, is the pairwise
most of `hops_between` (placement's alternatives ask it of thousands of nodes). Pure."""

from __future__ import annotations

import random

from fabric.places import Place, hops_between, span_hops


def pairwise(places: list[Place]) -> int | None:
    if len(places) == 1:
        return 0
    if not places or any(p.leaf is None for p in places):
        return None
    return max(hops_between(a, b) or 0 for i, a in enumerate(places) for b in places[i + 1 :])


def test_span_hops_is_the_pairwise_most_on_every_mix_of_leaves_and_spines():
    rng = random.Random(27)
    leaves = ["a", "b", "c", None]
    spines = ["s1", "s2", None]
    for _ in range(3000):
        places = [
            Place(leaf=rng.choice(leaves[: rng.randint(1, 4)]), spine=rng.choice(spines))
            for _ in range(rng.randint(0, 6))
        ]
        assert span_hops(places) == pairwise(places), places


def test_span_hops_counts_one_leaf_one_spine_group_and_beyond():
    a1, b1, c2 = Place("a", "s1"), Place("b", "s1"), Place("c", "s2")
    assert span_hops([a1]) == 0 and span_hops([]) is None
    assert span_hops([a1, a1]) == 1
    assert span_hops([a1, b1]) == 3
    assert span_hops([a1, b1, c2]) == 5
    assert span_hops([a1, Place("a", None)]) == 1  # one leaf, whatever its uplinks
    assert span_hops([a1, Place("b", None)]) == 5
