"""The capacity planner: the same N GPUs laid out as few dense servers or many sparse ones.

Pure arithmetic, no database: 80 GPUs as 10 x 8, 20 x 4 or 80 x 1 differ in node count, the
largest job one node holds (a Kubernetes pod never spans nodes), what one server failure takes
down, and how many GPU pairs talk inside a server (NVLink, or PCIe) rather than over the network.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


class CapacityRequestError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Layout:
    """One way to hold the GPUs; `servers` rounds up, so `spare_gpus` may be above zero."""

    gpus_per_server: int
    servers: int
    total_gpus: int
    spare_gpus: int
    nodes: int
    largest_job_one_node: int
    gpus_lost_per_server_failure: int
    share_lost_per_server_failure: float
    largest_job_after_server_failure: int
    gpu_pairs: int
    pairs_within_server: int
    pairs_over_network: int
    share_within_server: float
    share_over_network: float
    share_nvlink: float
    within_server_link: str | None
    gpus_needing_action: int = 0
    """Expected GPUs out of service for health, at the fleet's share needing action now."""
    servers_whole: int = 0
    """Expected servers with no GPU needing action: the ones that still hold a full-node job.
    One bad GPU takes a whole-node job's server, so denser servers lose more of them."""


def layout(gpus: int, per_server: int, *, nvlink: bool = True, action_share: float = 0.0) -> Layout:
    """N GPUs in servers of `per_server` each (one scheduler node per server).

    A pair of GPUs talks within a server when both sit in it: servers x C(per_server, 2) pairs
    of the C(total, 2); the rest cross the network. `nvlink` says whether GPUs in one server are
    NVLink-connected (SXM/HGX boards) or only PCIe. `action_share` (0..1) is the share of GPUs
    needing action (drain, reset, RMA), each independently: a server keeps every GPU with
    probability (1 - share) ** per_server.
    """
    servers = math.ceil(gpus / per_server)
    total = servers * per_server
    pairs = math.comb(total, 2)
    within = servers * math.comb(per_server, 2)
    share_within = within / pairs if pairs else 0.0
    link = None if per_server == 1 else ("NVLink" if nvlink else "PCIe")
    return Layout(
        gpus_per_server=per_server,
        servers=servers,
        total_gpus=total,
        spare_gpus=total - gpus,
        nodes=servers,
        largest_job_one_node=per_server,
        gpus_lost_per_server_failure=per_server,
        share_lost_per_server_failure=round(per_server / total, 4),
        largest_job_after_server_failure=total - per_server,
        gpu_pairs=pairs,
        pairs_within_server=within,
        pairs_over_network=pairs - within,
        share_within_server=round(share_within, 4),
        share_over_network=round(1 - share_within, 4) if pairs else 0.0,
        share_nvlink=round(share_within, 4) if link == "NVLink" else 0.0,
        within_server_link=link,
        gpus_needing_action=round(total * action_share),
        servers_whole=round(servers * (1 - action_share) ** per_server),
    )


def capacity_compare(
    *,
    gpus: int,
    per_server: Iterable[int],
    nvlink: bool = True,
    model: str | None = None,
    action_share: float = 0.0,
) -> dict:
    """Layouts of `gpus` GPUs side by side, densest first; `action_share` is the fleet's share
    of GPUs needing action (`health.selectors`), counted as lost. Raises CapacityRequestError."""
    if gpus < 1 or gpus > 10_000_000:
        raise CapacityRequestError("gpus", "between 1 and 10,000,000")
    sizes = sorted({int(p) for p in per_server}, reverse=True)
    if not sizes or any(p < 1 or p > 1024 for p in sizes):
        raise CapacityRequestError("per_server", "GPUs per server, each between 1 and 1024")
    return {
        "gpus": gpus,
        "model": model or None,
        "action_share": round(action_share, 4),
        "action_percent": round(action_share * 100, 2),
        "layouts": [layout(gpus, p, nvlink=nvlink, action_share=action_share) for p in sizes],
    }
