"""Per-leaf summaries of the fabric: which servers hang off each leaf (or leaf group) under
which spine group. Pure: plain facts in, plain facts out; no queries.

A multi-node question needs every server's place on the fabric (`fabric.places.Place`).
Worked out from the cables, that is a read of every server cable (about 200,000 at 25,000
servers on 8 rails); the same places kept as one row per leaf and spine group
(`placement.LeafPlacement`, written by `placement.leaf_summaries`) are a few hundred rows,
and give the places back exactly (`places_from`), so the answers are the same either way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from fabric.places import Place


@dataclass(frozen=True, slots=True)
class LeafSummary:
    """The servers of one leaf (group) that sit under one spine group, in id order."""

    leaf: str
    leaf_name: str
    spine: str | None
    spine_name: str
    servers: tuple[int, ...]


def leaf_summaries(places: Mapping[int, Place]) -> list[LeafSummary]:
    """The servers with a leaf, grouped by their leaf and spine group (in key order).

    Servers of no leaf (an NVLink domain alone) are left out: their place is the NVLink
    domain, which `places_from` adds back from the GPUs."""
    grouped: dict[tuple[str, str, str | None, str], list[int]] = defaultdict(list)
    for server_id, place in places.items():
        if place.leaf is not None:
            grouped[(place.leaf, place.leaf_name, place.spine, place.spine_name)].append(server_id)
    return [
        LeafSummary(leaf, leaf_name, spine, spine_name, tuple(sorted(servers)))
        for (leaf, leaf_name, spine, spine_name), servers in sorted(
            grouped.items(), key=lambda kv: (kv[0][0], kv[0][2] or "")
        )
    ]


def places_from(leaves: Iterable[LeafSummary], domains: Mapping[int, str]) -> dict[int, Place]:
    """Every server's place from the leaf summaries and the NVLink domains (server id ->
    domain): the same places as reading the cables gives (`selectors.fleet_places`). The
    servers of one summary outside any NVLink domain share one `Place` (it is frozen): a
    place made per server was most of the time of reading 25,000 servers' places."""
    places: dict[int, Place] = {}
    for summary in leaves:
        shared = Place(
            leaf=summary.leaf,
            spine=summary.spine,
            leaf_name=summary.leaf_name,
            spine_name=summary.spine_name,
        )
        places.update(dict.fromkeys(summary.servers, shared))
    for server_id, domain in domains.items():
        found = places.get(server_id)
        places[server_id] = Place(nvlink=domain) if found is None else replace(found, nvlink=domain)
    return places
