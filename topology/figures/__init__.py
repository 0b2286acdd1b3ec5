"""Plotly figures of the dashboard: pure functions from plain data to a figure dict.

Why pure and plain: fleet figures are built by a Celery task and cached as JSON, per-server
figures per request; neither may touch the database, and tests check their data without a
browser. The dicts have the shape `plotly.graph_objects.Figure(...).to_plotly_json()` gives
(the tests validate them with plotly's own schema); they are built directly because pushing
2,000 sectors through graph_objects' validators costs more than building them.

Escaping: plotly.js renders a subset of HTML (`<b>`, `<br>`, `<a href>`, entities) in labels,
hover text, tick labels, legend names and titles. Every string that came from an agent or a
scheduler (hostnames, GPU names, MIG profiles, node and cluster names, NIC names, even link
classes) goes through `core.figures.esc` before it lands in a figure.

Scale: no figure draws more than MAX_MARKS marks (sectors, links, markers, bars). Fleet
figures aggregate, by server model or rack, above their detail limits and say so in their
title; `layout.meta` tells the page whether a figure is aggregated or empty.
"""

from core.figures import MAX_MARKS, Figure, esc, natural_key

from .common import NVLINK_COLOURS, SPEED_SCALE, UNKNOWN_COLOUR
from .fleet import (
    FleetRows,
    GpuCountRow,
    MigCountRow,
    NodeRow,
    ServerRow,
    fleet_hierarchy_figure,
    server_node_map_figure,
)
from .racks import rack_figure
from .server import (
    highlight_gpus,
    interconnect_matrix_figure,
    link_class_colours,
    mig_layout_figure,
    nvlink_graph_figure,
)

__all__ = [
    "MAX_MARKS",
    "NVLINK_COLOURS",
    "SPEED_SCALE",
    "UNKNOWN_COLOUR",
    "Figure",
    "FleetRows",
    "GpuCountRow",
    "MigCountRow",
    "NodeRow",
    "ServerRow",
    "esc",
    "fleet_hierarchy_figure",
    "highlight_gpus",
    "interconnect_matrix_figure",
    "link_class_colours",
    "mig_layout_figure",
    "natural_key",
    "nvlink_graph_figure",
    "rack_figure",
    "server_node_map_figure",
]
