"""Failure domains: what a server, a rack or a switch takes with it when it fails.

`arithmetic` holds the pure part (plain rows in, answers out, no ORM), `selectors` the
queries that feed it and assemble the answers the API and the page show.
"""

from .arithmetic import (
    FailureDomainError,
    LeafLoss,
    ServerCables,
    ServerCounts,
    SpineLoss,
    capacity_after,
    fabric_loss_words,
    gpus_losing_nic,
    leaf_loss,
    rank_domains,
    server_shares,
    spine_loss,
    spine_losses,
    switch_split,
    uplink_shares,
)
from .selectors import (
    fabric_switch_choices,
    fabric_switch_ranking,
    failure_domain,
    failure_domain_choices,
    failure_domain_ranking,
    failure_domain_rankings,
    server_counts,
    server_resolve,
)

__all__ = [
    "FailureDomainError",
    "LeafLoss",
    "ServerCables",
    "ServerCounts",
    "SpineLoss",
    "capacity_after",
    "fabric_loss_words",
    "fabric_switch_choices",
    "fabric_switch_ranking",
    "failure_domain",
    "failure_domain_choices",
    "failure_domain_ranking",
    "failure_domain_rankings",
    "gpus_losing_nic",
    "leaf_loss",
    "rank_domains",
    "server_counts",
    "server_resolve",
    "server_shares",
    "spine_loss",
    "spine_losses",
    "switch_split",
    "uplink_shares",
]
