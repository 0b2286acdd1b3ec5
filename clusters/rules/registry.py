"""The finding rules of the scheduler layer, in one list, and the pass that runs them.

A rule is a pure function from a `Fleet` to the `FindingFact`s that should be open now; one
rule per finding type. Reconciliation (`clusters.reconcile`) builds the fleet, calls
`evaluate`, and writes the result.
"""

from __future__ import annotations

from collections.abc import Callable

from findings.facts import FindingFact

from .cluster import driver_skew
from .counts import gpu_count_mismatch, mig_mismatch
from .declared import declared_node_conflict, node_declared_twice
from .hardware import below_profile, gpu_model_mismatch, gpu_not_in_nvml, mig_pending_reboot
from .identity import (
    ambiguous_nodes,
    duplicate_gpu,
    duplicate_identity,
    node_without_server,
    nodes_sharing_a_server,
    server_without_node,
)
from .location import ip_address_duplicate, rack_units_overlap
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

LOCATION_RULES: tuple[Rule, ...] = (ip_address_duplicate, rack_units_overlap)
"""Rules that compare every server's addresses, age or rack place, and read nothing else
(`location.location_inputs` says what, per server): a pass of changes judges one whole again,
over those facts of the fleet alone (one query), when they changed for a server it judges."""

FLEET_RULES: tuple[Rule, ...] = (
    node_without_server,
    duplicate_identity,
    driver_skew,
    node_declared_twice,
    declared_node_conflict,
    *LOCATION_RULES,
)
"""Rules that compare across the fleet or a cluster: judged whole when a pass judges
everything; a pass of changes judges their per-node parts (`NODE_RULES`,
`SERVER_NODES_RULES`), recounts driver skew, and judges `LOCATION_RULES` again."""

NODE_RULES: tuple[Rule, ...] = (node_without_server, ambiguous_nodes, declared_node_conflict)
"""The findings about a node that read only the node, its binding and the servers its identity
matched (`node:<id>` subjects): a full pass re-judges them for the nodes that changed."""

SERVER_NODES_RULES: tuple[Rule, ...] = (nodes_sharing_a_server,)
"""Findings about one server's nodes that `SERVER_RULES` leaves to the full pass
(`cluster:<id>:server:<id>` subjects of `duplicate_identity`), which re-judges them for the
servers whose nodes changed. The rest of `duplicate_identity` (shared machine-ids and
hostnames) reads only server identities, and `driver_skew` reads a cluster's version counts."""

RULES: tuple[Rule, ...] = (*FLEET_RULES, *SERVER_RULES)

NODE_FINDING_TYPES = frozenset(
    {node_without_server.__name__, duplicate_identity.__name__, declared_node_conflict.__name__}
)
"""The finding types of `NODE_RULES` (`ambiguous_nodes` is part of `duplicate_identity`). A
pass of changes judges `declared_node_conflict` only for nodes no server declares (a changed
node some server declares judges the whole fleet), so it reads no server it lacks."""

SERVER_FINDING_TYPES = frozenset(rule.__name__ for rule in SERVER_RULES)
"""The finding types of `SERVER_RULES` (each rule is named for its type; a test holds it)."""


def evaluate(fleet: Fleet, rules: tuple[Rule, ...] = RULES) -> dict[tuple[str, str], FindingFact]:
    """Every rule over the fleet: the findings that should be open, by (type, subject)."""
    return {finding.key: finding for rule in rules for finding in rule(fleet)}
