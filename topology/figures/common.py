"""What the topology figures share beyond `core.figures`: their detail limits and colours.

The generic drawing (escaping, layout, titles, legends, ink, MAX_MARKS) is `core.figures`.
"""

from __future__ import annotations

from core.palette import CRITICAL, WARNING, tone_colour
from inventory.choices import PCIE_LINK_CLASSES

HIERARCHY_NODE_LIMIT = 200


"""Above this many servers in one scheduler group, the hierarchy groups them by model."""


SANKEY_DETAIL_LIMIT = 400


"""Above this many links, one link per binding is unreadable: the map aggregates."""


RACK_DETAIL_LIMIT = 2000


"""Above this many racked servers, the rack view draws one bar per rack."""


RACK_LABEL_LIMIT = 300


"""Up to this many racked servers, each is labelled with its hostname."""


NO_SCHEDULER = "no scheduler"


NO_AGENT = "no agent"


# One scale from fastest (dark green) to slowest (red); unknown classes last, in grey.
NVLINK_COLOURS = ("#00441b", "#006d2c", "#238b45", "#41ab5d", "#74c476")  # most links first


PCIE_COLOURS = {
    "PIX": "#a6d96a",
    "PXB": "#d9ef8b",
    "PHB": "#fee08b",
    "NODE": "#fdae61",
    "SYS": "#e34a33",
}


UNKNOWN_COLOUR = "#bdbdbd"


SPEED_SCALE = (*NVLINK_COLOURS, *(PCIE_COLOURS[c] for c in PCIE_LINK_CLASSES), UNKNOWN_COLOUR)


"""Every link colour, fastest first: a figure's colours appear in this order."""


NUMA_COLOURS = ("#2f6f9f", "#8c510a", "#6a3d9a", "#01665e", "#c51b7d", "#4d4d4d")


MIG_COLOURS = ("#2f6f9f", "#5aae61", "#e08214", "#8073ac", "#d6604d", "#35978f", "#bf812d")


MIG_SECTOR_COLOUR = "#b39ddb"


FREE_SLICE_COLOUR = "#eceff3"


KIND_COLOURS = {
    "physical": "#2f6f9f",
    "vm": "#6a3d9a",
    "kubernetes": "#326ce5",
    "slurm": "#00695c",
    "unscheduled": tone_colour(WARNING),  # a server in no scheduler wants a look
    "orphan": tone_colour(CRITICAL),  # a node without an agent
}


KIND_NAMES = {
    "physical": "physical server",
    "vm": "virtual machine (server)",
    "kubernetes": "Kubernetes node",
    "slurm": "Slurm node",
    "unscheduled": "server in no scheduler",
    "orphan": "node without an agent",
}
