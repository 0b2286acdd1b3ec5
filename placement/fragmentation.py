"""The fleet's fragmentation: free GPUs by the largest job each could still take. Pure over
plain (cluster, capacity, free) facts (`fleet_fragmentation` reads them once, through
`selectors.fleet_counts` with the GPUs running workloads hold), and the histogram figure.

Free GPUs on a node that is partly used are *stranded* for whole-node jobs: a 2 x 8 Slurm job
needs two nodes with all 8 free, so 40 free GPUs spread 2 and 3 per node hold nothing of that
shape. The figures are per cluster, since a job never spans clusters.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from clusters.choices import ClusterKind
from core.figures import GROUP_COLOURS, Figure, base_layout, empty_figure, esc, figure_title, plural


@dataclass(frozen=True, slots=True)
class NodeFree:
    """One schedulable node: its cluster and kind, its whole GPUs, and how many are free."""

    cluster: str
    kind: str
    capacity: int
    free: int
    weight: int = 1
    """The nodes it stands for (twins alike in all this reads)."""


def stranded_gpus(nodes: Iterable[tuple[int, int]]) -> int:
    """Free GPUs on partly used nodes, over (capacity, held) pairs: the one definition (the
    overview, `/metrics` and the capacity page count the same way)."""
    return sum(capacity - held for capacity, held in nodes if 0 < held < capacity)


@dataclass(slots=True)
class ClusterFragmentation:
    cluster: str
    kind: str
    nodes: int
    free_gpus: int
    stranded_gpus: int
    node_size: int
    """The most common GPU count of its nodes: the `gpus_per_node` of its whole-node jobs."""
    whole_nodes_free: int
    """Nodes with `node_size` GPUs free or more: the largest whole-node job, in nodes."""
    largest_one_node: int
    """The most GPUs free on one node: the largest pod (or single-node job) that fits."""
    histogram: dict[int, int] = field(default_factory=dict)
    """Free GPUs on a node -> nodes with that many free (0 included)."""

    @property
    def text(self) -> str:
        """`96 GPUs free; the largest 8-GPU-per-node Slurm job that fits now is 2 nodes; 40
        free GPUs are stranded on partly used nodes`."""
        free = plural(self.free_gpus, "GPU") + " free"
        if self.kind == ClusterKind.SLURM:
            fits = (
                f"the largest {self.node_size}-GPU-per-node Slurm job that fits now is "
                + plural(self.whole_nodes_free, "node")
            )
        else:
            fits = f"the largest pod that fits now takes {plural(self.largest_one_node, 'GPU')}"
        stranded = (
            f"{plural(self.stranded_gpus, 'free GPU')} "
            f"{'is' if self.stranded_gpus == 1 else 'are'} stranded on partly used nodes"
        )
        return "; ".join([free, fits, stranded])


def fragmentation(nodes: Iterable[NodeFree]) -> list[ClusterFragmentation]:
    """Per cluster, by name: free GPUs, stranded GPUs, whole-node jobs that fit, the largest
    single-node job, and the histogram of free GPUs per node."""
    by_cluster: dict[str, list[NodeFree]] = {}
    for node in nodes:
        by_cluster.setdefault(node.cluster, []).append(node)
    found = []
    for cluster, rows in sorted(by_cluster.items()):
        sizes: Counter[int] = Counter()
        histogram: Counter[int] = Counter()
        for n in rows:
            sizes[n.capacity] += n.weight
            histogram[n.free] += n.weight
        size = max(sizes.items(), key=lambda kv: (kv[1], kv[0]))[0] if sizes else 0
        found.append(
            ClusterFragmentation(
                cluster=cluster,
                kind=rows[0].kind,
                nodes=sum(n.weight for n in rows),
                free_gpus=sum(n.free * n.weight for n in rows),
                stranded_gpus=sum(
                    stranded_gpus([(n.capacity, n.capacity - n.free)]) * n.weight for n in rows
                ),
                node_size=size,
                whole_nodes_free=sum(n.weight for n in rows if size and n.free >= size),
                largest_one_node=max((n.free for n in rows), default=0),
                histogram=dict(sorted(histogram.items())),
            )
        )
    return found


def fragmentation_figure(clusters: list[ClusterFragmentation]) -> Figure:
    """Nodes by free GPUs, one bar series per cluster: a tall bar at the node size is whole
    nodes free; bars between 1 and it are the stranded GPUs."""
    shown = [c for c in clusters if c.nodes]
    if not shown:
        return empty_figure("no schedulable nodes with GPUs")
    traces = []
    for i, c in enumerate(shown):
        xs = list(c.histogram)
        traces.append(
            {
                "type": "bar",
                "name": esc(c.cluster),
                "x": xs,
                "y": [c.histogram[x] for x in xs],
                "marker": {"color": GROUP_COLOURS[i % len(GROUP_COLOURS)]},
                "hovertext": [
                    f"{esc(c.cluster)}: {plural(c.histogram[x], 'node')} with "
                    f"{plural(x, 'GPU')} free"
                    for x in xs
                ],
                "hovertemplate": "%{hovertext}<extra></extra>",
            }
        )
    layout: dict[str, Any] = base_layout(
        title=figure_title("Nodes by free GPUs"),
        height=260,
        barmode="group",
        xaxis={"title": {"text": "free GPUs on the node"}, "dtick": 1},
        yaxis={"title": {"text": "nodes"}, "rangemode": "tozero"},
        margin={"l": 50, "r": 10, "t": 30, "b": 40},
        showlegend=len(shown) > 1,
        meta={"empty": False, "aggregated": True},
    )
    return {"data": traces, "layout": layout}
