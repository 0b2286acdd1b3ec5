"""What every figure shares: escaping, colours, layout pieces, limits."""

from __future__ import annotations

import html
import re
from typing import Any

from core.palette import CRITICAL, WARNING, tone_colour
from inventory.choices import PCIE_LINK_CLASSES

Figure = dict[str, Any]


MAX_MARKS = 2000


"""The most sectors, links, markers or bars any figure draws."""


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


INK, MUTED, LINE = "#1f2933", "#5f6b7a", "#d9e0e8"


FONT = {"family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", "size": 12}


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


# Categories (clusters, groups) never take a state colour (core.palette): green, amber and
# red mean ok, warning and critical on every page, so a cluster is never drawn "healthy".
GROUP_COLOURS = ("#2f6f9f", "#6a3d9a", "#00838f", "#8d6e63", "#455a64", "#5c6bc0", "#00695c")


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


def esc(value: object) -> str:
    """Text for plotly: `&`, `<` and `>` as entities, so a name never becomes markup.

    Quotes stay as they are: plotly.js decodes only a few named entities (not `&quot;`), and
    without a `<` no tag, hence no attribute, can start.
    """
    return html.escape("" if value is None else str(value), quote=False)


def _plural(n: int | float, word: str, plural: str = "") -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {plural or word + 's'}"


def natural_key(value: str) -> tuple:
    """rack-2 before rack-10."""
    return tuple(int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", value))


def _layout(**extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "font": {**FONT, "color": INK},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
        "hoverlabel": {"align": "left"},
        "hovermode": "closest",
    }
    layout.update(extra)
    return layout


def _title(text: str) -> dict[str, Any]:
    return {"text": text, "x": 0, "xanchor": "left", "font": {"size": 13, "color": MUTED}}


def _empty(message: str, **meta: Any) -> Figure:
    """A figure that says why there is nothing to draw (instead of empty axes)."""
    return {
        "data": [],
        "layout": _layout(
            height=160,
            xaxis={"visible": False},
            yaxis={"visible": False},
            annotations=[
                {
                    "text": message,
                    "showarrow": False,
                    "x": 0.5,
                    "y": 0.5,
                    "xref": "paper",
                    "yref": "paper",
                    "font": {"color": MUTED, "size": 13},
                }
            ],
            meta={"empty": True, "aggregated": False, **meta},
        ),
    }


def _hidden_axes(**extra: Any) -> dict[str, Any]:
    return {
        "visible": False,
        "showgrid": False,
        "zeroline": False,
        "fixedrange": True,
        **extra,
    }


def _legend_swatch(name: str, colour: str, symbol: str = "square", group: str = "") -> dict:
    """A legend entry without data: heatmaps and Sankeys have no legend of their own."""
    return {
        "type": "scatter",
        "x": [None],
        "y": [None],
        "mode": "markers",
        "marker": {"symbol": symbol, "size": 12, "color": colour, "line": {"width": 0}},
        "name": name,
        "legendgroup": group or name,
        "showlegend": True,
        "hoverinfo": "skip",
    }


def _bottom_legend(title: str = "", **extra: Any) -> dict[str, Any]:
    legend: dict[str, Any] = {
        "orientation": "v",
        "x": 0,
        "xanchor": "left",
        "y": -0.02,
        "yanchor": "top",
        "itemclick": False,
        "itemdoubleclick": False,
        "font": {"size": 12},
    }
    if title:
        legend["title"] = {"text": title}
    legend.update(extra)
    return legend


def _side_legend(title: str = "") -> dict[str, Any]:
    return _bottom_legend(title, x=1.02, y=1, yanchor="top")
