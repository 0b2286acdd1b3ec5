"""The reads of the fabric app (its one read boundary): lists with their relations joined,
the plain facts the pure functions take, what the pages and the figure show. A fixed number
of queries whatever the fabric's size.

`cabling`: switches, adapters, cables, the tree, labels, bandwidth, the rules' facts, one
switch's ports, one server's cables, each fabric's card. `search`: a switch by name or GUID.
`figure`: the figure's facts and the cables the open findings call degraded. `servers`: some
servers (a workload's) with their leaves and the spines above them.
"""

from __future__ import annotations

from .cabling import (
    LINK_FACT_FIELDS,
    FabricCard,
    HostFacts,
    PortRow,
    ServerBandwidth,
    ServerFabric,
    adapter_list,
    fabric_adapter_guids,
    fabric_cards,
    fabric_findings,
    fabric_host_bandwidth,
    fabric_list,
    fabric_nvlink_blocks,
    fabric_scheduler_tree,
    fabric_server_labels,
    fabric_tree,
    link_list,
    server_fabric,
    snapshot_list,
    switch_list,
    switch_ports,
    switch_tree_facts,
)
from .figure import (
    fabric_figure_facts,
    fabric_figures_facts,
    fabrics_degraded_keys,
)
from .search import switch_search, switch_search_q
from .servers import servers_on_fabric

__all__ = [
    "LINK_FACT_FIELDS",
    "FabricCard",
    "HostFacts",
    "PortRow",
    "ServerBandwidth",
    "ServerFabric",
    "adapter_list",
    "fabric_adapter_guids",
    "fabric_cards",
    "fabric_figure_facts",
    "fabric_figures_facts",
    "fabric_findings",
    "fabric_host_bandwidth",
    "fabric_list",
    "fabric_nvlink_blocks",
    "fabric_scheduler_tree",
    "fabric_server_labels",
    "fabric_tree",
    "fabrics_degraded_keys",
    "link_list",
    "server_fabric",
    "servers_on_fabric",
    "snapshot_list",
    "switch_list",
    "switch_ports",
    "switch_search",
    "switch_search_q",
    "switch_tree_facts",
]
