"""Placement: where a job fits now, and why; what the fleet looks like to a scheduler.

The package keeps one read boundary and a pure core:

- `types`: the request, its shape per scheduler, its filters, rankings, the answer's rows;
- `facts`: the fleet as read (nodes, their servers' GPUs and links), plain objects;
- `reads`: every query (the only module that touches the ORM);
- `gpu_sets`: the GPUs chosen inside one node;
- `planner`: a request placed on a fleet, in memory;
- `alternatives`: nearby requests that fit when this one does not;
- `service`: `placement_find`, which reads, plans and answers.
"""

from .facts import Fleet, FleetGpu, FleetMig, FleetNode
from .gpu_sets import best_gpu_set
from .planner import Planner, node_free_gpus, node_offer, plan_request
from .reads import fleet_counts, fleet_load, placement_choices
from .service import placement_find
from .types import (
    Alternative,
    BlockedNode,
    ClusterAnswer,
    Filters,
    GpuChoice,
    NeedingAction,
    NodeChoice,
    PlacementRequest,
    PlacementRequestError,
    PlacementResult,
    Ranking,
    gpu_memory_text,
    request_shape,
)

__all__ = [
    "Alternative",
    "BlockedNode",
    "ClusterAnswer",
    "Filters",
    "Fleet",
    "FleetGpu",
    "FleetMig",
    "FleetNode",
    "GpuChoice",
    "NeedingAction",
    "NodeChoice",
    "PlacementRequest",
    "PlacementRequestError",
    "PlacementResult",
    "Planner",
    "Ranking",
    "best_gpu_set",
    "fleet_counts",
    "fleet_load",
    "gpu_memory_text",
    "node_free_gpus",
    "node_offer",
    "placement_choices",
    "placement_find",
    "plan_request",
    "request_shape",
]
