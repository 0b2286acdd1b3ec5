"""The global search: one query over every kind of thing, its results grouped by kind.

NetBox's global search is the model. It composes the apps (servers, GPUs, MIG devices and NICs
from inventory, nodes from clusters, switches from fabric), so it lives here, in the layer
above them. Each kind's
matching rule is its owning app's (`inventory.selectors.server_search_q`, ...), the same one
the lists' `?search=` applies, so a kind's "+N more" link opens a list of exactly those rows
(NICs have no list: their "+N more" asks for a narrower search).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from clusters import selectors as cluster_selectors
from fabric import selectors as fabric_selectors
from inventory import selectors as inventory_selectors

PER_KIND = 10
"""Results shown per kind; the rest are behind the kind's "+N more" link."""
QUERY_MAX = 200


@dataclass(frozen=True)
class SearchGroup:
    """One kind's results: the first `PER_KIND` rows, how many matched, the filtered list."""

    kind: str
    rows: Sequence[Any]
    total: int
    more_url: str | None

    @property
    def more(self) -> int:
        return max(self.total - len(self.rows), 0)


@dataclass(frozen=True)
class _Kind:
    name: str
    search: Callable[..., tuple[list[Any], int]]
    list_url: Callable[[str], str | None]


def _filtered(url_name: str) -> Callable[[str], str]:
    return lambda q: f"{reverse(url_name)}?{urlencode({'search': q})}"


KINDS: tuple[_Kind, ...] = (
    _Kind("servers", inventory_selectors.server_search, _filtered("server-list")),
    _Kind("nodes", cluster_selectors.node_search, _filtered("node-list")),
    _Kind("GPUs", inventory_selectors.gpu_search, _filtered("gpu-list")),
    _Kind("MIG devices", inventory_selectors.mig_device_search, _filtered("gpu-list")),
    _Kind("switches", fabric_selectors.switch_search, _filtered("fabric")),
    _Kind("NICs", inventory_selectors.nic_search, lambda q: None),
)


def search(query: str, *, per_kind: int = PER_KIND) -> list[SearchGroup]:
    """Every kind with at least one match, in a fixed order; two queries per kind, whatever
    the fleet's size. A blank query finds nothing."""
    query = query.strip()[:QUERY_MAX]
    if not query:
        return []
    groups = []
    for kind in KINDS:
        rows, total = kind.search(query, limit=per_kind)
        if total:
            groups.append(SearchGroup(kind.name, rows, total, kind.list_url(query)))
    return groups
