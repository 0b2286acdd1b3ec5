"""The finding rules of the scheduler layer, in one list, and the pass that runs them.

A rule is a pure function from a `Fleet` to the `FindingFact`s that should be open now; one
rule per finding type. Reconciliation (`clusters.reconcile`) builds the fleet, calls
`evaluate`, and writes the result.
"""

from __future__ import annotations

from collections.abc import Callable

from .cluster import driver_skew
from .counts import gpu_count_mismatch, mig_mismatch
from .hardware import below_profile, gpu_model_mismatch, gpu_not_in_nvml, mig_pending_reboot
from .identity import duplicate_gpu, duplicate_identity, node_without_server, server_without_node
from .state import node_unavailable, stale_agent, unhealthy_gpu
from .types import FindingFact, Fleet

Rule = Callable[[Fleet], list[FindingFact]]

RULES: tuple[Rule, ...] = (
    node_without_server,
    server_without_node,
    duplicate_identity,
    duplicate_gpu,
    gpu_count_mismatch,
    mig_mismatch,
    gpu_model_mismatch,
    gpu_not_in_nvml,
    mig_pending_reboot,
    below_profile,
    stale_agent,
    unhealthy_gpu,
    node_unavailable,
    driver_skew,
)


def evaluate(fleet: Fleet, rules: tuple[Rule, ...] = RULES) -> dict[tuple[str, str], FindingFact]:
    """Every rule over the fleet: the findings that should be open, by (type, subject)."""
    return {finding.key: finding for rule in rules for finding in rule(fleet)}
