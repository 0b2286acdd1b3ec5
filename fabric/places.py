"""Where a server sits on the network, and how many switches lie between two servers. Pure:
places in, hops out; no queries.

One rule for everyone who asks how close nodes are: placement choosing a multi-node answer
(`placement.locality`) and a running workload judged for how well it was placed
(`workloads.locality`). Hops count the switches a message crosses between two servers: 1 under
one leaf (or leaf group), 3 through a spine (leaf, spine, leaf), 5 through a core; unknown
(None) when a server is on no known fabric. One server is 0: nothing crosses the network.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Place:
    """Where one server sits: its leaf (group), spine group and NVLink domain; None: unknown."""

    leaf: str | None = None
    spine: str | None = None
    nvlink: str | None = None
    leaf_name: str = ""
    spine_name: str = ""


NOWHERE = Place()


def between(hops: int) -> str:
    """`1 switch between them`, `3 switches between them`."""
    return f"{hops} switch{'' if hops == 1 else 'es'} between them"


def hops_between(a: Place, b: Place) -> int | None:
    """Switches crossed between two servers: 1 (one leaf), 3 (one spine group), else 5."""
    if a.leaf is None or b.leaf is None:
        return None
    if a.leaf == b.leaf:
        return 1
    if a.spine is not None and a.spine == b.spine:
        return 3
    return 5


def span_hops(places: Sequence[Place]) -> int | None:
    """The most switches between two of the servers: 0 for one, None when one is nowhere."""
    if len(places) == 1:
        return 0
    if not places or any(p.leaf is None for p in places):
        return None
    # the pairwise most of `hops_between`, in one pass (pairs were 100 million at 10,000 nodes):
    # one leaf is 1; else two on different leaves outside one spine group exist unless every
    # server is in the same one
    if len({p.leaf for p in places}) == 1:
        return 1
    spines = {p.spine for p in places}
    return 3 if len(spines) == 1 and None not in spines else 5
