"""Moved to `health.selectors` (issue 22): when a GPU needs action is a read like the others.

This name stays only for the modules that placement/ is taking out of topology/ in parallel
(topology/placement/reads.py, planner.py, failure_domains.py, capacity.py,
views_placement.py); delete it once they import `health.selectors`.
"""

from __future__ import annotations

from .selectors import (
    NEEDS_ACTION,
    OPEN_HEALTH,
    action_label,
    findings_needing_action,
    gpu_needs_action,
    gpus_needing_action_by_type,
    gpus_needing_action_count,
    needing_action_share,
)

__all__ = [
    "NEEDS_ACTION",
    "OPEN_HEALTH",
    "action_label",
    "findings_needing_action",
    "gpu_needs_action",
    "gpus_needing_action_by_type",
    "gpus_needing_action_count",
    "needing_action_share",
]
