"""The finding rules of the scheduler layer, in one list, and the pass that runs them.

A rule is a pure function from a `Fleet` to the `FindingFact`s that should be open now; one
rule per finding type. Reconciliation (`clusters.reconcile`) builds the fleet, calls
`evaluate`, and writes the result.
"""

from __future__ import annotations

from collections.abc import Callable

from core.findings import FindingFact

from .cluster import driver_skew
from .counts import gpu_count_mismatch, mig_mismatch
from .hardware import below_profile, gpu_model_mismatch, gpu_not_in_nvml, mig_pending_reboot
from .identity import duplicate_gpu, duplicate_identity, node_without_server, server_without_node
from .state import node_unavailable, stale_agent, unhealthy_gpu
from .types import Fleet

Rule = Callable[[Fleet], list[FindingFact]]

SERVER_RULES: tuple[Rule, ...] = (
    server_without_node,
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
)
"""Rules whose findings about a server (or a node bound to it) read only that server, its
nodes, its VMs or host, and the servers holding GPUs it claims: they can be judged for a few
servers at a time (`clusters.reconcile.reconcile_servers`)."""

FLEET_RULES: tuple[Rule, ...] = (node_without_server, duplicate_identity, driver_skew)
"""Rules that compare across the fleet or a cluster: the full pass only."""

RULES: tuple[Rule, ...] = (*FLEET_RULES, *SERVER_RULES)

SERVER_FINDING_TYPES = frozenset(rule.__name__ for rule in SERVER_RULES)
"""The finding types of `SERVER_RULES` (each rule is named for its type; a test holds it)."""


def evaluate(fleet: Fleet, rules: tuple[Rule, ...] = RULES) -> dict[tuple[str, str], FindingFact]:
    """Every rule over the fleet: the findings that should be open, by (type, subject)."""
    return {finding.key: finding for rule in rules for finding in rule(fleet)}
