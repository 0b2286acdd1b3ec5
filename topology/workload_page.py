"""One workload's page: its facts, its GPUs per node, and those GPUs drawn on each of its
servers' interconnect, with the hops between its nodes in words.

Here, not in workloads/, because it draws topology's server figures (workloads/ sits below
topology/). A fixed number of queries whatever the workload's size: the workload with its
allocations (two), and its servers' GPUs, NICs and links (server_detail's prefetches, over
at most MAX_SERVER_FIGURES servers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inventory import selectors as inventory_selectors
from inventory.models import Gpu
from workloads import selectors as workload_selectors
from workloads.describe import (
    NodeAllocations,
    by_node,
    locality_text,
    shape_text,
    shown_allocations,
    switch_hops_text,
    within_node_text,
)

from .figures import Figure, highlight_gpus, interconnect_matrix_figure
from .interconnect import server_interconnect

MAX_SERVER_FIGURES = 16
"""Servers drawn at most: a 64-node job's page lists every node, and draws the first 16."""

HELD_LABEL = "held by this workload"


@dataclass(frozen=True)
class ServerFigure:
    server_id: int
    hostname: str
    nodes: list[str]
    gpu_indexes: list[int]
    figure: Figure | None

    @property
    def figure_name(self) -> str:
        """Unique on the page: it makes the figure's element ids."""
        return f"interconnect-{self.server_id}"


def workload_page(pk: int) -> dict[str, Any] | None:
    """Everything the workload page shows (None: no such workload)."""
    workload = workload_selectors.workload_detail().filter(pk=pk).first()
    if workload is None:
        return None
    allocations = list(workload.allocations.all())
    shown = shown_allocations(allocations)
    nodes = by_node(shown, with_server=True)
    locality = workload.locality if isinstance(workload.locality, dict) else {}
    return {
        "workload": workload,
        "shape": shape_text(workload.node_count, workload.gpu_count, workload.gpus_per_node),
        "locality": locality,
        "locality_text": locality_text(locality, workload.node_count),
        "within_node_text": within_node_text(locality.get("within_node")),
        "hops_text": switch_hops_text(locality.get("switch_hops"), len(nodes)),
        "better": _names(locality.get("better")),
        "nodes": nodes,
        "holds_now": any(a.until is None for a in shown),
        "history": len(allocations) > len(shown),
        "server_figures": server_figures(nodes),
        "drawn_all": len({n.server_id for n in nodes if n.server_id}) <= MAX_SERVER_FIGURES,
    }


def server_figures(nodes: list[NodeAllocations]) -> list[ServerFigure]:
    """Each server's interconnect matrix with the workload's GPUs there outlined."""
    held: dict[int, list[str]] = {}
    indexes: dict[int, set[int]] = {}
    for entry in nodes:
        if entry.server_id is None:
            continue
        held.setdefault(entry.server_id, []).append(entry.node)
        indexes.setdefault(entry.server_id, set()).update(
            a.gpu.index for a in entry.gpus if a.gpu is not None
        )
    wanted = list(held)[:MAX_SERVER_FIGURES]
    servers = {s.pk: s for s in inventory_selectors.server_detail().filter(pk__in=wanted)}
    out = []
    for server_id in wanted:
        server = servers.get(server_id)
        if server is None:
            continue
        interconnect = server_interconnect(server)
        figure = None
        if interconnect["devices"]:
            figure = highlight_gpus(
                interconnect_matrix_figure(interconnect),
                interconnect,
                indexes[server_id],
                label=HELD_LABEL,
            )
        out.append(
            ServerFigure(
                server_id=server_id,
                hostname=server.hostname,
                nodes=held[server_id],
                gpu_indexes=sorted(indexes[server_id]),
                figure=figure,
            )
        )
    return out


def _names(value: Any) -> list[str]:
    """`better` as locality gives it: a list of node names (or of {"node": …}), else none."""
    if not isinstance(value, list):
        return []
    names = []
    for item in value:
        if isinstance(item, str):
            names.append(item)
        elif isinstance(item, dict) and item.get("node"):
            names.append(str(item["node"]))
    return names


def gpu_workloads(gpu: Gpu) -> dict[str, Any]:
    """The GPU page's workloads: who holds it now, and those it ran, followed by serial so a
    GPU keeps its past workloads after it moved (two queries)."""
    return {
        "held_by": workload_selectors.held_now(gpu_id=gpu.pk).get(gpu.pk, []),
        "recent_workloads": workload_selectors.recent_workloads(
            gpu_id=gpu.pk, gpu_serial=gpu.serial
        ),
    }
