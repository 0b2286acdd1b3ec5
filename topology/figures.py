"""Plotly figures of the dashboard: pure functions from plain data to a figure dict.

Why pure and plain: fleet figures are built by a Celery task and cached as JSON, per-server
figures per request; neither may touch the database, and tests check their data without a
browser. The dicts have the shape `plotly.graph_objects.Figure(...).to_plotly_json()` gives
(the tests validate them with plotly's own schema); they are built directly because pushing
2,000 sectors through graph_objects' validators costs more than building them.

Escaping: plotly.js renders a subset of HTML (`<b>`, `<br>`, `<a href>`, entities) in labels,
hover text, tick labels, legend names and titles. Every string that came from an agent or a
scheduler (hostnames, GPU names, MIG profiles, node and cluster names, NIC names, even link
classes) goes through `esc` before it lands in a figure.

Scale: no figure draws more than MAX_MARKS marks (sectors, links, markers, bars). Fleet
figures aggregate, by server model or rack, above their detail limits and say so in their
title; `layout.meta` tells the page whether a figure is aggregated or empty.
"""

from __future__ import annotations

import html
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict
from urllib.parse import quote

from inventory.choices import PCIE_LINK_CLASSES, link_rank

from .interconnect import describe_link_class, interconnect_matrix

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
GROUP_COLOURS = ("#2f6f9f", "#2e7d32", "#a86400", "#6a3d9a", "#00838f", "#8d6e63", "#c2185b")
MIG_COLOURS = ("#2f6f9f", "#5aae61", "#e08214", "#8073ac", "#d6604d", "#35978f", "#bf812d")
MIG_SECTOR_COLOUR = "#b39ddb"
GPU_COUNT_SCALE = [[0, "#f7fbff"], [0.5, "#6baed6"], [1, "#08306b"]]
FREE_SLICE_COLOUR = "#eceff3"
KIND_COLOURS = {
    "physical": "#2f6f9f",
    "vm": "#6a3d9a",
    "kubernetes": "#326ce5",
    "slurm": "#2e7d32",
    "unscheduled": "#a86400",
    "orphan": "#b3261e",
}
KIND_NAMES = {
    "physical": "physical server",
    "vm": "virtual machine (server)",
    "kubernetes": "Kubernetes node",
    "slurm": "Slurm node",
    "unscheduled": "server in no scheduler",
    "orphan": "node without an agent",
}


# Input rows of the fleet figures (produced by `topology.fleet.fleet_rows`) ----------------


class ServerRow(TypedDict):
    id: int
    hostname: str
    model: str  # the server model: DMI product, else vendor
    rack: str
    rack_position: int | None
    is_virtual: bool
    physical_host_id: int | None
    state: str


class GpuCountRow(TypedDict):
    server_id: int
    model: str  # the NVML name
    count: int
    mig_count: int  # of them in MIG mode


class MigCountRow(TypedDict):
    server_id: int
    model: str  # the NVML name of the GPU the instances are on
    profile: str
    count: int


class NodeRow(TypedDict):
    id: int
    name: str
    cluster: str
    kind: str  # kubernetes / slurm
    server_id: int | None
    binding_method: str
    gpu_capacity: int


class FleetRows(TypedDict):
    servers: list[ServerRow]
    gpus: list[GpuCountRow]
    mig_devices: list[MigCountRow]
    nodes: list[NodeRow]


# Helpers ----------------------------------------------------------------------------------


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


def _nvlink_count(link_class: str) -> int | None:
    if link_class.startswith("NV") and link_class[2:].isdigit():
        return int(link_class[2:])
    return None


def _is_known_class(link_class: str) -> bool:
    return _nvlink_count(link_class) is not None or link_class in PCIE_COLOURS


def link_class_colours(classes: Iterable[str]) -> list[tuple[str, str]]:
    """The classes present, fastest first, each with its colour on one green-to-red scale.

    NV<n> classes take the greens, most links darkest; unknown classes go last, in grey.
    """
    ordered = sorted(
        {c for c in classes if c},
        key=lambda c: (not _is_known_class(c), link_rank(c), c),
    )
    result, nv_seen = [], 0
    for link_class in ordered:
        if _nvlink_count(link_class) is not None:
            colour = NVLINK_COLOURS[min(nv_seen, len(NVLINK_COLOURS) - 1)]
            nv_seen += 1
        else:
            colour = PCIE_COLOURS.get(link_class, UNKNOWN_COLOUR)
        result.append((link_class, colour))
    return result


def _discrete_colorscale(colours: Sequence[str]) -> list[list]:
    """Step colours for z = 0..k-1 with zmin=-0.5, zmax=k-0.5: one flat band per value."""
    if not colours:
        return [[0, UNKNOWN_COLOUR], [1, UNKNOWN_COLOUR]]
    k = len(colours)
    scale: list[list] = []
    for i, colour in enumerate(colours):
        scale += [[i / k, colour], [(i + 1) / k, colour]]
    return scale


def _numa_key(numa: object) -> tuple[int, int]:
    return (0, numa) if isinstance(numa, int) and numa >= 0 else (1, 0)


def _numa_name(numa: object) -> str:
    return f"NUMA node {esc(numa)}" if isinstance(numa, int) and numa >= 0 else "NUMA unknown"


def _device_label(device: Mapping[str, Any]) -> str:
    """`GPU3 NVIDIA H100 80GB HBM3 · NUMA 0`, escaped, for hover text."""
    key = f"<b>{esc(device.get('key'))}</b>"
    if device.get("kind") == "gpu":
        text = f"{key} {esc(device.get('name') or 'GPU')}"
    else:
        speed = device.get("speed_mbps")
        speed_text = f" {speed / 1000:g} Gb/s" if isinstance(speed, (int, float)) and speed else ""
        kind = esc(device.get("nic_kind") or "")
        text = f"{key} NIC {kind}{speed_text}".rstrip()
    numa = device.get("numa_node")
    if isinstance(numa, int) and numa >= 0:
        text += f" · NUMA {numa}"
    return text


# Per-server figures -----------------------------------------------------------------------


def interconnect_matrix_figure(interconnect: Mapping[str, Any]) -> Figure:
    """`nvidia-smi topo -m` as a coloured grid: one cell per device pair, fastest green.

    Expects `topology.interconnect.server_interconnect(...)`'s dict. Every class present gets
    a legend entry in plain words, fastest first.
    """
    devices = list(interconnect.get("devices") or [])
    if not devices:
        return _empty("No GPUs or NICs reported: there is no interconnect to show.")
    matrix = interconnect.get("matrix") or interconnect_matrix(
        devices, list(interconnect.get("links") or [])
    )
    keys = [esc(d.get("key")) for d in devices]
    labels = [_device_label(d) for d in devices]
    palette = link_class_colours(c for row in matrix for c in row if c not in ("", "X"))
    position = {link_class: i for i, (link_class, _) in enumerate(palette)}

    z: list[list[int | None]] = []
    text: list[list[str]] = []
    hover: list[list[str]] = []
    for i, row in enumerate(matrix):
        z_row: list[int | None] = []
        text_row, hover_row = [], []
        for j, cell in enumerate(row):
            if cell == "X":
                z_row.append(None)
                text_row.append("X")
                hover_row.append(f"{labels[i]}<br>the device itself")
            elif not cell:
                z_row.append(None)
                text_row.append("")
                hover_row.append(f"{labels[i]}<br>{labels[j]}<br>no path reported")
            else:
                z_row.append(position[cell])
                text_row.append(esc(cell))
                hover_row.append(
                    f"{labels[i]}<br>{labels[j]}<br><b>{esc(cell)}</b>: "
                    f"{esc(describe_link_class(cell))}"
                )
        z.append(z_row)
        text.append(text_row)
        hover.append(hover_row)

    numa_ticks = [
        f"{key} · NUMA {d['numa_node']}"
        if isinstance(d.get("numa_node"), int) and d["numa_node"] >= 0
        else key
        for key, d in zip(keys, devices, strict=True)
    ]
    heatmap = {
        "type": "heatmap",
        "name": "link class",
        "x": keys,
        "y": keys,
        "z": z,
        "text": text,
        "texttemplate": "%{text}",
        "hovertext": hover,
        "hovertemplate": "%{hovertext}<extra></extra>",
        "colorscale": _discrete_colorscale([colour for _, colour in palette]),
        "zmin": -0.5,
        "zmax": max(len(palette), 1) - 0.5,
        "showscale": False,
        "xgap": 2,
        "ygap": 2,
        "showlegend": False,
    }
    legend_traces = [
        _legend_swatch(f"<b>{esc(c)}</b> {esc(describe_link_class(c))}", colour)
        for c, colour in palette
    ]
    size = len(devices)
    return {
        "data": [heatmap, *legend_traces],
        "layout": _layout(
            height=120 + 34 * size + 22 * (len(palette) + 1),
            margin={"l": 10, "r": 10, "t": 10, "b": 10},
            xaxis={
                "type": "category",
                "side": "top",
                "showgrid": False,
                "zeroline": False,
                "fixedrange": True,
                "automargin": True,
            },
            yaxis={
                "type": "category",
                "autorange": "reversed",
                "showgrid": False,
                "zeroline": False,
                "fixedrange": True,
                "automargin": True,
                "tickmode": "array",
                "tickvals": keys,
                "ticktext": numa_ticks,
            },
            showlegend=bool(palette),
            legend=_bottom_legend("Link classes, fastest first"),
            meta={"empty": False, "aggregated": False, "classes": [esc(c) for c, _ in palette]},
        ),
    }


def _circle(slot: int, slots: int, radius: float = 1.0) -> tuple[float, float]:
    angle = math.pi / 2 - 2 * math.pi * slot / max(slots, 1)
    return round(radius * math.cos(angle), 4), round(radius * math.sin(angle), 4)


def _edge_width(nvlinks: int) -> float:
    return round(min(max(1.0 + nvlinks / 3, 1.5), 8.0), 2)


def nvlink_graph_figure(interconnect: Mapping[str, Any], *, include_nics: bool = True) -> Figure:
    """GPUs on a circle grouped (and coloured) by NUMA node, NVLinks as edges.

    Edge width grows with the number of bonded NVLinks. With NVSwitches, all-to-all NV18 is
    one edge per GPU to the switch fabric at the centre, not 28 crossing edges. NICs sit
    outside the circle beside the GPU they share a PCIe switch with (dashed).
    """
    devices = list(interconnect.get("devices") or [])
    gpus = sorted(
        (d for d in devices if d.get("kind") == "gpu"),
        key=lambda d: (_numa_key(d.get("numa_node")), d.get("index") or 0),
    )
    if not gpus:
        return _empty("No GPUs reported: there is no NVLink graph to show.")
    groups: list[object] = []
    for gpu in gpus:
        if gpu.get("numa_node") not in groups:
            groups.append(gpu.get("numa_node"))
    gaps = len(groups) if len(groups) > 1 else 0
    slots = len(gpus) + gaps
    position: dict[str, tuple[float, float]] = {}
    angle: dict[str, float] = {}
    slot = 0
    for g_index, numa in enumerate(groups):
        if gaps and g_index:
            slot += 1
        for gpu in (d for d in gpus if d.get("numa_node") == numa):
            position[gpu["key"]] = _circle(slot, slots)
            angle[gpu["key"]] = math.pi / 2 - 2 * math.pi * slot / slots
            slot += 1

    gpu_by_key = {g["key"]: g for g in gpus}
    links = list(interconnect.get("links") or [])
    nvlink_pairs: dict[tuple[str, str], int] = {}
    for link in links:
        a, b, count = link.get("a"), link.get("b"), _nvlink_count(link.get("link_class") or "")
        if a in gpu_by_key and b in gpu_by_key and count and a != b:
            pair = (
                (a, b)
                if (gpu_by_key[a].get("index") or 0) < (gpu_by_key[b].get("index") or 0)
                else (b, a)
            )
            nvlink_pairs[pair] = max(count, nvlink_pairs.get(pair, 0))
    palette = dict(link_class_colours(f"NV{n}" for n in nvlink_pairs.values()))
    switches = interconnect.get("nvswitch_count") or 0
    hub = bool(switches and nvlink_pairs)

    # (x0, y0, x1, y1, hover) by NVLink count
    edges: dict[int, list[tuple[float, float, float, float, str]]] = defaultdict(list)
    if hub:
        per_gpu: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for (a, b), count in nvlink_pairs.items():
            per_gpu[a].append((b, count))
            per_gpu[b].append((a, count))
        for key, peers in per_gpu.items():
            count = max(n for _, n in peers)
            x, y = position[key]
            hover = (
                f"<b>{esc(key)}</b> to the NVSwitch fabric: {_plural(count, 'NVLink')}<br>"
                f"NV{count} to {_plural(len(peers), 'GPU')} through "
                f"{_plural(switches, 'NVSwitch', 'NVSwitches')}"
            )
            edges[count].append((x, y, 0.0, 0.0, hover))
    else:
        for (a, b), count in sorted(nvlink_pairs.items()):
            (x0, y0), (x1, y1) = position[a], position[b]
            hover = (
                f"<b>{esc(a)}</b> ↔ <b>{esc(b)}</b>: NV{count}<br>"
                f"{esc(describe_link_class(f'NV{count}'))}"
            )
            edges[count].append((x0, y0, x1, y1, hover))

    data: list[dict] = []
    for count in sorted(edges, reverse=True):
        rows = edges[count]
        xs: list[float | None] = []
        ys: list[float | None] = []
        for x0, y0, x1, y1, _ in rows:
            xs += [x0, x1, None]
            ys += [y0, y1, None]
        colour = palette.get(f"NV{count}", NVLINK_COLOURS[0])
        name = f"NV{count}: {_plural(count, 'NVLink')}" + (
            " per GPU to the NVSwitches" if hub else " between the pair"
        )
        group = f"nv{count}"
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": xs,
                "y": ys,
                "line": {"width": _edge_width(count), "color": colour},
                "name": name,
                "legendgroup": group,
                "hoverinfo": "skip",
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": [round((r[0] + r[2]) / 2, 4) for r in rows],
                "y": [round((r[1] + r[3]) / 2, 4) for r in rows],
                "marker": {"size": 10, "color": colour, "opacity": 0},
                "hovertext": [r[4] for r in rows],
                "hovertemplate": "%{hovertext}<extra></extra>",
                "legendgroup": group,
                "showlegend": False,
                "name": name,
            }
        )

    if include_nics:
        data += _nic_traces(devices, links, gpu_by_key, angle)

    if hub:
        data.append(
            {
                "type": "scatter",
                "mode": "markers+text",
                "x": [0],
                "y": [0],
                "text": [f"{_plural(switches, 'NVSwitch', 'NVSwitches')}"],
                "textposition": "bottom center",
                "marker": {"symbol": "diamond", "size": 34, "color": "#14283a"},
                "hovertext": [
                    f"<b>{_plural(switches, 'NVSwitch', 'NVSwitches')}</b><br>every GPU's "
                    "NVLinks go to the switches, so each GPU reaches every other at full "
                    "NVLink bandwidth"
                ],
                "hovertemplate": "%{hovertext}<extra></extra>",
                "name": "NVSwitch fabric",
            }
        )

    for g_index, numa in enumerate(groups):
        members = [d for d in gpus if d.get("numa_node") == numa]
        affinity = {d.get("cpu_affinity") for d in members}
        name = _numa_name(numa)
        if len(affinity) == 1 and next(iter(affinity)):
            name += f" · CPUs {esc(next(iter(affinity)))}"
        colour = (
            NUMA_COLOURS[g_index % len(NUMA_COLOURS)] if _numa_key(numa)[0] == 0 else UNKNOWN_COLOUR
        )
        data.append(
            {
                "type": "scatter",
                "mode": "markers+text",
                "x": [position[d["key"]][0] for d in members],
                "y": [position[d["key"]][1] for d in members],
                "text": [esc(d["key"]) for d in members],
                "textposition": "middle center",
                "textfont": {"color": "#ffffff", "size": 11},
                "marker": {"size": 40, "color": colour, "line": {"color": "#ffffff", "width": 2}},
                "hovertext": [_gpu_hover(d, nvlink_pairs) for d in members],
                "hovertemplate": "%{hovertext}<extra></extra>",
                "name": name,
            }
        )

    annotations = []
    if not nvlink_pairs:
        annotations.append(
            {
                "text": "No NVLink between these GPUs: they reach each other over PCIe "
                "(see the matrix).",
                "showarrow": False,
                "x": 0.5,
                "y": 1.0,
                "xref": "paper",
                "yref": "paper",
                "yanchor": "bottom",
                "font": {"color": MUTED},
            }
        )
    return {
        "data": data,
        "layout": _layout(
            height=540,
            margin={"l": 10, "r": 10, "t": 30, "b": 10},
            xaxis=_hidden_axes(range=[-1.9, 1.9]),
            yaxis=_hidden_axes(range=[-1.75, 1.75], scaleanchor="x", scaleratio=1),
            showlegend=True,
            legend=_side_legend(),
            annotations=annotations,
            meta={"empty": False, "aggregated": False, "nvswitch_hub": hub},
        ),
    }


def _gpu_hover(gpu: Mapping[str, Any], nvlink_pairs: Mapping[tuple[str, str], int]) -> str:
    key = gpu["key"]
    peers = sorted((b if a == key else a, n) for (a, b), n in nvlink_pairs.items() if key in (a, b))
    lines = [_device_label(gpu)]
    if gpu.get("uuid"):
        lines.append(esc(gpu["uuid"]))
    if gpu.get("pci_bus_id"):
        lines.append(f"PCI {esc(gpu['pci_bus_id'])}")
    if gpu.get("mig_enabled"):
        lines.append("MIG mode on")
    if peers:
        lines.append("NVLink to " + ", ".join(f"{esc(p)} (NV{n})" for p, n in peers))
    else:
        lines.append("no NVLink")
    return "<br>".join(lines)


def _nic_traces(
    devices: Sequence[Mapping[str, Any]],
    links: Sequence[Mapping[str, Any]],
    gpu_by_key: Mapping[str, Mapping[str, Any]],
    angle: Mapping[str, float],
) -> list[dict]:
    """NICs outside the circle, each beside its closest GPU; dashed lines for PIX/PXB."""
    nics = [d for d in devices if d.get("kind") == "nic"]
    if not nics:
        return []
    best: dict[str, tuple[int, str, str]] = {}  # nic -> (rank, gpu key, class)
    for link in links:
        a, b, link_class = link.get("a"), link.get("b"), link.get("link_class") or ""
        if a in gpu_by_key and b not in gpu_by_key:
            gpu, nic = a, b
        elif b in gpu_by_key and a not in gpu_by_key:
            gpu, nic = b, a
        else:
            continue
        rank = link_rank(link_class)
        if nic not in best or (rank, gpu) < best[nic][:2]:
            best[nic] = (rank, gpu, link_class)
    placed: Counter = Counter()
    xs, ys, labels, hovers = [], [], [], []
    line_x: list[float | None] = []
    line_y: list[float | None] = []
    for n_index, nic in enumerate(nics):
        key = nic.get("key")
        near = best.get(key)
        if near and near[1] in angle:
            base = angle[near[1]]
        else:
            same_numa = [
                k for k, g in gpu_by_key.items() if g.get("numa_node") == nic.get("numa_node")
            ]
            base = (
                sum(angle[k] for k in same_numa) / len(same_numa)
                if same_numa
                else -math.pi / 2 + 0.3 * n_index
            )
        offset = 0.16 * placed[round(base, 3)]
        placed[round(base, 3)] += 1
        x, y = round(1.45 * math.cos(base + offset), 4), round(1.45 * math.sin(base + offset), 4)
        xs.append(x)
        ys.append(y)
        labels.append(esc(key))
        hover = _device_label(nic)
        if near:
            hover += f"<br>closest GPU: {esc(near[1])} ({esc(near[2])})"
        hovers.append(hover)
        if near and near[2] in ("PIX", "PXB"):
            gx = math.cos(angle[near[1]])
            gy = math.sin(angle[near[1]])
            line_x += [x, round(gx, 4), None]
            line_y += [y, round(gy, 4), None]
    traces: list[dict] = []
    if line_x:
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": line_x,
                "y": line_y,
                "line": {"width": 1.5, "color": "#8a97a6", "dash": "dash"},
                "name": "NIC on the GPU's PCIe switch (PIX/PXB)",
                "hoverinfo": "skip",
            }
        )
    traces.append(
        {
            "type": "scatter",
            "mode": "markers+text",
            "x": xs,
            "y": ys,
            "text": labels,
            "textposition": "top center",
            "textfont": {"size": 10, "color": MUTED},
            "marker": {"symbol": "square", "size": 14, "color": MUTED},
            "hovertext": hovers,
            "hovertemplate": "%{hovertext}<extra></extra>",
            "name": "NIC",
        }
    )
    return traces


MIG_PROFILE_RE = re.compile(r"^(?:(?P<ci>\d+)c\.)?(?P<gi>(?P<g>\d+)g\.\d+gb\S*)$", re.IGNORECASE)


def mig_slices(gpu_name: str) -> tuple[int, int]:
    """(compute slices, memory slices): A30 has 4 and 4; A100, H100, H200, B200 7 and 8."""
    return (4, 4) if "A30" in (gpu_name or "").upper() else (7, 8)


def parse_mig_profile(profile: str) -> tuple[str, int | None, int | None]:
    """`1c.3g.40gb` -> ("3g.40gb", 3, 1): the GPU instance profile, its compute slices, and
    the compute slices of this compute instance; None where the profile cannot be read."""
    match = MIG_PROFILE_RE.match((profile or "").strip())
    if not match:
        return profile or "", None, None
    gi_slices = int(match["g"])
    ci_slices = int(match["ci"]) if match["ci"] else gi_slices
    return match["gi"], gi_slices, ci_slices


def _bytes_text(value: object) -> str:
    if not isinstance(value, (int, float)) or value <= 0:
        return ""
    return f"{value / 2**30:.0f} GiB"


def mig_layout_figure(gpus: Sequence[Mapping[str, Any]]) -> Figure:
    """Each MIG-enabled GPU as two rows of slots (compute, memory) and the instances in them.

    A GPU instance covers memory slices placement_start .. +placement_size (NVML's placement
    unit is the memory slice) and as many compute slices as its profile's `<n>g` from the same
    start. Compute instances sharing one GPU instance are listed on its block. A GPU in MIG
    mode without instances shows only free slots.
    """
    mig_gpus = sorted(
        (g for g in gpus if g.get("mig_enabled") or g.get("mig_devices")),
        key=lambda g: g.get("index") or 0,
    )
    if not mig_gpus:
        return _empty("No GPU is in MIG mode.")
    categories: list[str] = []
    free: dict[str, list] = {"y": [], "base": [], "hover": []}
    blocks: dict[str, dict[str, list]] = {}
    unplaced: list[str] = []
    widest = 0
    for gpu in mig_gpus:
        gpu_key = f"GPU{esc(gpu.get('index'))}"
        gpu_text = f"<b>{gpu_key}</b> {esc(gpu.get('name') or '')}".rstrip()
        compute_total, memory_total = mig_slices(gpu.get("name") or "")
        instances: dict[object, list[Mapping[str, Any]]] = defaultdict(list)
        for device in gpu.get("mig_devices") or []:
            instances[device.get("gpu_instance_id")].append(device)
        for devices in instances.values():
            start, size = devices[0].get("placement_start"), devices[0].get("placement_size")
            if isinstance(start, int) and isinstance(size, int):
                memory_total = max(memory_total, start + size)
        widest = max(widest, memory_total)
        compute_row, memory_row = f"{gpu_key} compute", f"{gpu_key} memory"
        categories += [compute_row, memory_row]
        for row, total, kind in (
            (compute_row, compute_total, "compute"),
            (memory_row, memory_total, "memory"),
        ):
            for s in range(total):
                free["y"].append(row)
                free["base"].append(s)
                free["hover"].append(f"{gpu_text}<br>{kind} slice {s}: free")
        for gi_id, devices in sorted(instances.items(), key=lambda item: str(item[0])):
            devices = sorted(devices, key=lambda d: d.get("compute_instance_id") or 0)
            first = devices[0]
            gi_profile, gi_slices, _ = parse_mig_profile(first.get("profile") or "")
            start, size = first.get("placement_start"), first.get("placement_size")
            label = esc(gi_profile or "MIG")
            if not (isinstance(start, int) and isinstance(size, int) and size > 0):
                unplaced.append(f"{gpu_key} GI {esc(gi_id)} ({label})")
                continue
            compute_width = max(0, min(gi_slices or size, compute_total - start))
            ci_lines = [
                f"CI {esc(d.get('compute_instance_id'))} {esc(d.get('profile'))} "
                f"{esc(d.get('uuid') or '')}".rstrip()
                for d in devices
            ]
            hover = (
                f"{gpu_text}<br>GPU instance {esc(gi_id)}: <b>{label}</b>"
                f" {_bytes_text(first.get('memory_bytes'))}<br>"
                f"compute slices {start}–{start + compute_width - 1}, "
                f"memory slices {start}–{start + size - 1}<br>" + "<br>".join(ci_lines)
            )
            block = blocks.setdefault(
                gi_profile or "MIG", {"y": [], "x": [], "base": [], "text": [], "hover": []}
            )
            compute_text = label + (f" · {len(devices)} CIs" if len(devices) > 1 else "")
            for row, width, text in (
                (compute_row, compute_width, compute_text),
                (memory_row, size, f"GI {esc(gi_id)}"),
            ):
                if width <= 0:
                    continue
                block["y"].append(row)
                block["x"].append(width)
                block["base"].append(start)
                block["text"].append(text)
                block["hover"].append(hover)

    bar = {"type": "bar", "orientation": "h", "hovertemplate": "%{hovertext}<extra></extra>"}
    data: list[dict] = [
        {
            **bar,
            "name": "free slice",
            "y": free["y"],
            "x": [1] * len(free["y"]),
            "base": free["base"],
            "hovertext": free["hover"],
            "marker": {"color": FREE_SLICE_COLOUR, "line": {"color": "#ffffff", "width": 2}},
        }
    ]

    def profile_order(profile: str) -> tuple:
        _, gi_slices, _ = parse_mig_profile(profile)
        return (gi_slices or 99, natural_key(profile))

    for p_index, profile in enumerate(sorted(blocks, key=profile_order)):
        block = blocks[profile]
        data.append(
            {
                **bar,
                "name": esc(profile),
                "y": block["y"],
                "x": block["x"],
                "base": block["base"],
                "text": block["text"],
                "textposition": "inside",
                "insidetextanchor": "middle",
                "textangle": 0,
                "hovertext": block["hover"],
                "marker": {
                    "color": MIG_COLOURS[p_index % len(MIG_COLOURS)],
                    "line": {"color": "#ffffff", "width": 2},
                },
            }
        )
    annotations = []
    if unplaced:
        annotations.append(
            {
                "text": "Placement not reported for " + ", ".join(unplaced),
                "showarrow": False,
                "x": 0,
                "y": 1.0,
                "xref": "paper",
                "yref": "paper",
                "xanchor": "left",
                "yanchor": "bottom",
                "font": {"color": MUTED},
            }
        )
    return {
        "data": data,
        "layout": _layout(
            height=max(110 + 56 * len(mig_gpus), 80 + 22 * (len(blocks) + 2)),
            barmode="overlay",
            bargap=0.25,
            xaxis={
                "range": [0, widest],
                "tickmode": "array",
                "tickvals": [s + 0.5 for s in range(widest)],
                "ticktext": [str(s) for s in range(widest)],
                "title": {"text": "slice"},
                "showgrid": False,
                "zeroline": False,
                "fixedrange": True,
            },
            yaxis={
                "type": "category",
                "categoryorder": "array",
                "categoryarray": categories,
                "autorange": "reversed",
                "fixedrange": True,
                "automargin": True,
            },
            showlegend=True,
            legend=_side_legend("GPU instance profiles"),
            annotations=annotations,
            meta={"empty": False, "aggregated": False, "unplaced": len(unplaced)},
        ),
    }


# Fleet figures ----------------------------------------------------------------------------


class _Fleet:
    """The fleet rows indexed once, shared by the builders below."""

    def __init__(self, rows: FleetRows) -> None:
        self.servers: dict[int, ServerRow] = {s["id"]: s for s in rows["servers"]}
        self.gpus: dict[int, Counter] = defaultdict(Counter)
        self.mig_gpus: dict[int, Counter] = defaultdict(Counter)
        for row in rows["gpus"]:
            if row["server_id"] in self.servers and row["count"]:
                self.gpus[row["server_id"]][row["model"] or ""] += row["count"]
                self.mig_gpus[row["server_id"]][row["model"] or ""] += row["mig_count"]
        self.mig: dict[tuple[int, str], Counter] = defaultdict(Counter)
        for row in rows["mig_devices"]:
            if row["server_id"] in self.servers and row["count"]:
                self.mig[(row["server_id"], row["model"] or "")][row["profile"] or ""] += row[
                    "count"
                ]
        self.nodes_by_server: dict[int, list[NodeRow]] = defaultdict(list)
        self.orphans: list[NodeRow] = []
        for node in sorted(rows["nodes"], key=lambda n: (n["cluster"], n["name"])):
            if node["server_id"] in self.servers:
                self.nodes_by_server[node["server_id"]].append(node)
            else:
                self.orphans.append(node)
        self.vms_by_host: dict[int, list[int]] = defaultdict(list)
        for server in self.servers.values():
            if server["physical_host_id"] in self.servers:
                self.vms_by_host[server["physical_host_id"]].append(server["id"])
        self.nodes = rows["nodes"]

    def gpu_total(self, server_id: int) -> int:
        return sum(self.gpus[server_id].values()) if server_id in self.gpus else 0

    def model(self, server_id: int) -> str:
        return self.servers[server_id]["model"] or "unknown model"

    def host(self, server_id: int) -> ServerRow | None:
        return self.servers.get(self.servers[server_id]["physical_host_id"] or -1)

    def server_text(self, server_id: int) -> str:
        """`<b>dgx-07</b> DGXH100 · rack-01 U10 · 8 GPUs`, escaped."""
        s = self.servers[server_id]
        parts = [f"<b>{esc(s['hostname'])}</b>"]
        if s["model"]:
            parts.append(esc(s["model"]))
        if s["rack"]:
            parts.append(
                f"{esc(s['rack'])}" + (f" U{s['rack_position']}" if s["rack_position"] else "")
            )
        parts.append(_plural(self.gpu_total(server_id), "GPU"))
        text = " · ".join(parts)
        host = self.host(server_id)
        if host:
            text += f"<br>VM on {esc(host['hostname'])}"
        return text


def _floor4(value: float) -> float:
    """Rounded down, so children never sum above their parent in a 'total' sunburst."""
    return math.floor(value * 10_000) / 10_000


def _mig_values(profiles: Counter, gpu_model: str, parent: int) -> list[tuple[str, int, float]]:
    """(profile, instances, GPUs' worth) per profile: a 1g instance of an H100 is 1/7 GPU."""
    compute_total = mig_slices(gpu_model)[0]
    rows = []
    for profile, count in sorted(profiles.items(), key=lambda item: natural_key(item[0])):
        _, _, ci_slices = parse_mig_profile(profile)
        rows.append((profile, count, count * (ci_slices or 0) / compute_total))
    total = sum(v for _, _, v in rows)
    scale = parent / total if total > parent else 1.0  # inconsistent reports never break it
    return [(p, n, _floor4(v * scale)) for p, n, v in rows]


def fleet_hierarchy_figure(
    rows: FleetRows,
    *,
    node_limit: int = HIERARCHY_NODE_LIMIT,
    max_sectors: int = MAX_MARKS,
) -> Figure:
    """A sunburst: scheduler group -> node (with its server) -> GPU model -> MIG instances.

    Sector values are GPUs, so the ring of GPU models sums to the GPUs in the inventory. A
    server bound in several clusters sits under one group named after all of them (it is not
    counted twice); servers in no scheduler form their own group. MIG sectors are sized by
    compute slices (a 1g instance of an H100 is 1/7 of a GPU) and labelled with instance
    counts. Above `node_limit` servers in a group, servers are grouped by model; if the
    figure would still have more than `max_sectors` sectors, the node level goes, then the
    smallest groups merge.
    """
    fleet = _Fleet(rows)
    with_gpus = sorted(
        (sid for sid in fleet.gpus if fleet.gpu_total(sid)),
        key=lambda sid: natural_key(fleet.servers[sid]["hostname"]),
    )
    total = sum(fleet.gpu_total(sid) for sid in with_gpus)
    if not total:
        return _empty("No GPUs reported yet.")
    groups: dict[str, list[int]] = defaultdict(list)
    for sid in with_gpus:
        clusters = sorted({n["cluster"] for n in fleet.nodes_by_server[sid]})
        groups[" + ".join(clusters) if clusters else NO_SCHEDULER].append(sid)

    sectors: list[dict[str, Any]] = []
    mode = "node"
    for mode in ("node", "model", "group"):
        sectors = _hierarchy_sectors(fleet, groups, total, mode, node_limit)
        if len(sectors) <= max_sectors:
            break
    keep = len(groups)
    while len(sectors) > max_sectors and keep > 1:
        keep = max(1, keep // 2)
        ranked = sorted(groups, key=lambda g: -sum(fleet.gpu_total(s) for s in groups[g]))
        merged: dict[str, list[int]] = {g: groups[g] for g in ranked[:keep]}
        merged["other groups"] = [s for g in ranked[keep:] for s in groups[g]]
        sectors = _hierarchy_sectors(fleet, merged, total, "group", node_limit)
    aggregated = mode != "node" or any(len(m) > node_limit for m in groups.values())

    servers_with_gpus = len(with_gpus)
    title = f"{_plural(total, 'GPU')} on {_plural(servers_with_gpus, 'server')}, by scheduler"
    if aggregated:
        title += " · large groups are shown by server model; click a sector to zoom in"
    elif fleet.orphans:
        title += f" · {_plural(len(fleet.orphans), 'node')} without an agent not shown"
    return {
        "data": [
            {
                "type": "sunburst",
                "ids": [s["id"] for s in sectors],
                "parents": [s["parent"] for s in sectors],
                "labels": [s["label"] for s in sectors],
                "values": [s["value"] for s in sectors],
                "customdata": [[s["level"], s["count"]] for s in sectors],
                "hovertext": [s["hover"] for s in sectors],
                "hovertemplate": "%{hovertext}<extra></extra>",
                "branchvalues": "total",
                "marker": {
                    "colors": [s["colour"] for s in sectors],
                    "line": {"color": "#ffffff", "width": 1},
                },
                "maxdepth": 3 if len(sectors) > 150 else -1,
                "sort": False,
                "insidetextorientation": "radial",
            }
        ],
        "layout": _layout(
            height=600,
            margin={"l": 10, "r": 10, "t": 36, "b": 10},
            title=_title(title),
            meta={"empty": False, "aggregated": aggregated, "sectors": len(sectors)},
        ),
    }


def _hierarchy_sectors(
    fleet: _Fleet, groups: Mapping[str, list[int]], total: int, mode: str, node_limit: int
) -> list[dict[str, Any]]:
    """Sectors for one level of aggregation: "node", "model" (servers by model) or "group"."""
    sectors = [
        {
            "id": "fleet",
            "parent": "",
            "label": "All GPUs",
            "value": total,
            "level": "fleet",
            "count": total,
            "hover": f"<b>{_plural(total, 'GPU')}</b> in the inventory",
            "colour": "#ffffff",
        }
    ]

    def add_models(parent_id: str, members: list[int], colour: str) -> None:
        models: Counter = Counter()
        mig_models: Counter = Counter()
        profiles: dict[str, Counter] = defaultdict(Counter)
        for sid in members:
            models.update(fleet.gpus[sid])
            mig_models.update(fleet.mig_gpus[sid])
            for model in fleet.gpus[sid]:
                profiles[model].update(fleet.mig.get((sid, model), Counter()))
        for model, count in sorted(models.items(), key=lambda item: (-item[1], item[0])):
            model_id = f"{parent_id}/g:{esc(model)}"
            mig_text = f" ({mig_models[model]:,} in MIG mode)" if mig_models[model] else ""
            sectors.append(
                {
                    "id": model_id,
                    "parent": parent_id,
                    "label": esc(model or "unknown GPU"),
                    "value": count,
                    "level": "gpu_model",
                    "count": count,
                    "hover": f"<b>{count:,} × {esc(model or 'unknown GPU')}</b>{mig_text}",
                    "colour": colour,
                }
            )
            for profile, instances, value in _mig_values(profiles[model], model, count):
                sectors.append(
                    {
                        "id": f"{model_id}/p:{esc(profile)}",
                        "parent": model_id,
                        "label": f"{esc(profile or 'MIG')} × {instances:,}",
                        "value": value,
                        "level": "mig",
                        "count": instances,
                        "hover": f"<b>{_plural(instances, 'MIG instance')}</b> "
                        f"{esc(profile)} on {esc(model)}<br>{value:g} GPUs' worth of slices",
                        "colour": MIG_SECTOR_COLOUR,
                    }
                )

    for g_index, (group, members) in enumerate(
        sorted(groups.items(), key=lambda item: (item[0] == NO_SCHEDULER, item[0]))
    ):
        colour = (
            UNKNOWN_COLOUR if group == NO_SCHEDULER else GROUP_COLOURS[g_index % len(GROUP_COLOURS)]
        )
        group_id = f"c:{esc(group)}"
        gpus = sum(fleet.gpu_total(s) for s in members)
        sectors.append(
            {
                "id": group_id,
                "parent": "fleet",
                "label": esc(group),
                "value": gpus,
                "level": "group",
                "count": gpus,
                "hover": f"<b>{esc(group)}</b><br>{_plural(len(members), 'server')}, "
                f"{_plural(gpus, 'GPU')}",
                "colour": colour,
            }
        )
        if mode == "group":
            add_models(group_id, members, colour)
        elif mode == "node" and len(members) <= node_limit:
            for sid in members:
                member_id = f"{group_id}/s:{sid}"
                nodes = fleet.nodes_by_server[sid]
                sectors.append(
                    {
                        "id": member_id,
                        "parent": group_id,
                        "label": _member_label(fleet.servers[sid], nodes),
                        "value": fleet.gpu_total(sid),
                        "level": "node",
                        "count": fleet.gpu_total(sid),
                        "hover": _member_hover(fleet, sid, nodes),
                        "colour": colour,
                    }
                )
                add_models(member_id, [sid], colour)
        else:
            by_model: dict[str, list[int]] = defaultdict(list)
            for sid in members:
                by_model[fleet.model(sid)].append(sid)
            for model, sids in sorted(by_model.items()):
                member_id = f"{group_id}/m:{esc(model)}"
                gpus = sum(fleet.gpu_total(s) for s in sids)
                sectors.append(
                    {
                        "id": member_id,
                        "parent": group_id,
                        "label": f"{esc(model)} × {len(sids):,}",
                        "value": gpus,
                        "level": "server_model",
                        "count": gpus,
                        "hover": f"<b>{_plural(len(sids), 'server')}</b> {esc(model)}"
                        f"<br>{_plural(gpus, 'GPU')}",
                        "colour": colour,
                    }
                )
                add_models(member_id, sids, colour)
    return sectors


def _member_label(server: ServerRow, nodes: Sequence[NodeRow]) -> str:
    """The node name, and the server's hostname where it differs."""
    hostname = esc(server["hostname"])
    names = sorted({n["name"] for n in nodes})
    if not names or names == [server["hostname"]]:
        return hostname
    return f"{', '.join(esc(n) for n in names)}<br>on {hostname}"


def _member_hover(fleet: _Fleet, server_id: int, nodes: Sequence[NodeRow]) -> str:
    lines = [f"server {fleet.server_text(server_id)}"]
    for node in nodes:
        lines.append(f"{esc(node['kind'])} node {esc(node['cluster'])}/{esc(node['name'])}")
    if not nodes:
        lines.append("in no scheduler")
    return "<br>".join(lines)


def _rgba(colour: str, alpha: float) -> str:
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


class _Sankey:
    """Nodes and links of a Sankey, nodes added once by key."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.labels: list[str] = []
        self.hovers: list[str] = []
        self.kinds: list[str] = []
        self.links: list[tuple[int, int, int, str, str]] = []  # source, target, value, ...

    def node(self, key: str, label: str, hover: str, kind: str) -> int:
        if key not in self.index:
            self.index[key] = len(self.labels)
            self.labels.append(label)
            self.hovers.append(hover)
            self.kinds.append(kind)
        return self.index[key]

    def link(self, source: int, target: int, value: int, hover: str, kind: str) -> None:
        self.links.append((source, target, value, hover, kind))


def server_node_map_figure(
    rows: FleetRows,
    *,
    detail_limit: int = SANKEY_DETAIL_LIMIT,
    max_links: int = MAX_MARKS,
) -> Figure:
    """A Sankey from physical servers (through their VMs) to Kubernetes and Slurm nodes.

    One link per binding of a node to a server; a VM hangs between its physical host and its
    nodes; servers bound to no node flow into a "no scheduler" sink, and nodes no agent
    reports for come from a "no agent" source. Above `detail_limit` links, servers are
    grouped by model and nodes by cluster (link values count the bindings), so the figure
    never draws more than `max_links` links.
    """
    fleet = _Fleet(rows)
    if not fleet.servers and not fleet.orphans:
        return _empty("No servers or nodes yet.")
    sankey = _server_node_detail(fleet)
    aggregated = len(sankey.links) > detail_limit
    if aggregated:
        sankey = _server_node_aggregate(fleet, by_model=True)
        if len(sankey.links) > max_links:
            sankey = _server_node_aggregate(fleet, by_model=False)

    bindings = sum(len(v) for v in fleet.nodes_by_server.values())
    unscheduled = sum(
        1 for sid in fleet.servers if _unscheduled(fleet, sid) and not fleet.vms_by_host[sid]
    )
    title = (
        f"{_plural(len(fleet.servers), 'server')} → {_plural(len(fleet.nodes), 'node')}: "
        f"{_plural(bindings, 'binding')}, {unscheduled:,} in no scheduler, "
        f"{len(fleet.orphans):,} without an agent"
    )
    if aggregated:
        title += " · grouped by server model and cluster"
    colours = [KIND_COLOURS.get(kind, UNKNOWN_COLOUR) for kind in sankey.kinds]
    link_kind_colour = {
        "binding": _rgba("#2f6f9f", 0.3),
        "vm": _rgba(KIND_COLOURS["vm"], 0.3),
        "unscheduled": _rgba(KIND_COLOURS["unscheduled"], 0.45),
        "orphan": _rgba(KIND_COLOURS["orphan"], 0.45),
    }
    kinds_present = [k for k in KIND_COLOURS if k in set(sankey.kinds)]
    right_column = sum(1 for k in sankey.kinds if k in ("kubernetes", "slurm", "unscheduled"))
    return {
        "data": [
            {
                "type": "sankey",
                "arrangement": "snap",
                "valueformat": ",d",
                "node": {
                    "label": sankey.labels,
                    "customdata": sankey.hovers,
                    "hovertemplate": "%{customdata}<extra></extra>",
                    "color": colours,
                    "pad": 6,
                    "thickness": 14,
                    "line": {"width": 0},
                },
                "link": {
                    "source": [link[0] for link in sankey.links],
                    "target": [link[1] for link in sankey.links],
                    "value": [link[2] for link in sankey.links],
                    "customdata": [link[3] for link in sankey.links],
                    "hovertemplate": "%{customdata}<extra></extra>",
                    "color": [link_kind_colour.get(link[4], LINE) for link in sankey.links],
                },
            },
            *(_legend_swatch(KIND_NAMES[k], KIND_COLOURS[k]) for k in kinds_present),
        ],
        "layout": _layout(
            height=max(380, min(1600, 80 + 18 * right_column)),
            margin={"l": 10, "r": 10, "t": 36, "b": 10},
            title=_title(title),
            xaxis=_hidden_axes(),
            yaxis=_hidden_axes(),
            showlegend=True,
            legend=_bottom_legend(orientation="h"),
            meta={"empty": False, "aggregated": aggregated, "links": len(sankey.links)},
        ),
    }


def _unscheduled(fleet: _Fleet, server_id: int) -> bool:
    return not fleet.nodes_by_server.get(server_id)


def _node_kind(node: NodeRow) -> str:
    return node["kind"] if node["kind"] in KIND_COLOURS else "kubernetes"


def _binding_text(node: NodeRow) -> str:
    method = node.get("binding_method") or ""
    return f" (bound by {esc(method.replace('_', ' '))})" if method else ""


def _server_node_detail(fleet: _Fleet) -> _Sankey:
    sankey = _Sankey()

    def server_node(sid: int) -> int:
        s = fleet.servers[sid]
        virtual = bool(s["is_virtual"] or fleet.host(sid))
        label = esc(s["hostname"]) + (" (VM)" if virtual else "")
        return sankey.node(
            f"s{sid}", label, fleet.server_text(sid), "vm" if virtual else "physical"
        )

    sinks: dict[str, int] = {}
    ordered = sorted(fleet.servers, key=lambda sid: natural_key(fleet.servers[sid]["hostname"]))
    for sid in ordered:
        here = server_node(sid)
        nodes = fleet.nodes_by_server.get(sid, [])
        host = fleet.host(sid)
        if host:
            out = max(1, len(nodes))
            sankey.link(
                server_node(host["id"]),
                here,
                out,
                f"<b>{esc(host['hostname'])}</b> hosts the VM "
                f"<b>{esc(fleet.servers[sid]['hostname'])}</b>",
                "vm",
            )
        for node in nodes:
            target = sankey.node(
                f"n{node['id']}",
                f"{esc(node['cluster'])}/{esc(node['name'])}",
                f"<b>{esc(node['cluster'])}/{esc(node['name'])}</b> {esc(node['kind'])} node"
                f"<br>advertises {_plural(node['gpu_capacity'], 'GPU')}"
                f"<br>server {esc(fleet.servers[sid]['hostname'])}",
                _node_kind(node),
            )
            sankey.link(
                here,
                target,
                1,
                f"server <b>{esc(fleet.servers[sid]['hostname'])}</b> is "
                f"{esc(node['kind'])} node <b>{esc(node['cluster'])}/{esc(node['name'])}</b>"
                + _binding_text(node),
                "binding",
            )
        if not nodes and not fleet.vms_by_host.get(sid):
            if "unscheduled" not in sinks:
                sinks["unscheduled"] = sankey.node(
                    NO_SCHEDULER,
                    NO_SCHEDULER,
                    "<b>servers in no scheduler</b><br>no Kubernetes or Slurm node is bound "
                    "to them",
                    "unscheduled",
                )
            sankey.link(
                here,
                sinks["unscheduled"],
                1,
                f"<b>{esc(fleet.servers[sid]['hostname'])}</b> is in no scheduler",
                "unscheduled",
            )
    for node in fleet.orphans:
        if "orphan" not in sinks:
            sinks["orphan"] = sankey.node(
                NO_AGENT,
                NO_AGENT,
                "<b>nodes without an agent</b><br>no server report matches them",
                "orphan",
            )
        target = sankey.node(
            f"n{node['id']}",
            f"{esc(node['cluster'])}/{esc(node['name'])}",
            f"<b>{esc(node['cluster'])}/{esc(node['name'])}</b> {esc(node['kind'])} node"
            f"<br>advertises {_plural(node['gpu_capacity'], 'GPU')}<br>no agent reports for it",
            _node_kind(node),
        )
        sankey.link(
            sinks["orphan"],
            target,
            1,
            f"no agent reports for <b>{esc(node['cluster'])}/{esc(node['name'])}</b>",
            "orphan",
        )
    return sankey


def _server_node_aggregate(fleet: _Fleet, *, by_model: bool) -> _Sankey:
    """Servers grouped by model (VMs by their host's model), nodes by cluster."""
    sankey = _Sankey()
    values: Counter = Counter()  # (source key, target key, kind) -> bindings
    members: dict[str, set[int]] = defaultdict(set)
    labels: dict[str, tuple[str, str]] = {}
    clusters: dict[str, Counter] = defaultdict(Counter)
    for node in fleet.nodes:
        clusters[node["cluster"]][node["kind"]] += 1

    def group_of(sid: int) -> str:
        host = fleet.host(sid)
        if host or fleet.servers[sid]["is_virtual"]:
            model = fleet.model(host["id"]) if host and by_model else ""
            key = f"vm:{model}"
            labels[key] = ("VMs" + (f" on {esc(model)}" if model else ""), "vm")
        else:
            model = fleet.model(sid) if by_model else ""
            key = f"pm:{model}"
            labels[key] = (esc(model) if model else "physical servers", "physical")
        members[key].add(sid)
        return key

    for sid in fleet.servers:
        source = group_of(sid)
        nodes = fleet.nodes_by_server.get(sid, [])
        host = fleet.host(sid)
        if host:
            values[(group_of(host["id"]), source, "vm")] += max(1, len(nodes))
        for node in nodes:
            values[(source, f"c:{node['cluster']}", "binding")] += 1
        if not nodes and not fleet.vms_by_host.get(sid):
            values[(source, NO_SCHEDULER, "unscheduled")] += 1
    for node in fleet.orphans:
        values[(NO_AGENT, f"c:{node['cluster']}", "orphan")] += 1

    def endpoint(key: str) -> int:
        if key == NO_SCHEDULER:
            return sankey.node(key, key, "<b>servers in no scheduler</b>", "unscheduled")
        if key == NO_AGENT:
            return sankey.node(key, key, "<b>nodes without an agent</b>", "orphan")
        if key.startswith("c:"):
            name = key[2:]
            kinds = clusters[name]
            kind = kinds.most_common(1)[0][0] if kinds else "kubernetes"
            n = sum(kinds.values())
            return sankey.node(
                key,
                f"{esc(name)} · {_plural(n, 'node')}",
                f"<b>{esc(name)}</b> ({esc(kind)})<br>{_plural(n, 'node')}",
                kind if kind in KIND_COLOURS else "kubernetes",
            )
        label, kind = labels[key]
        n = len(members[key])
        gpus = sum(fleet.gpu_total(s) for s in members[key])
        return sankey.node(
            key,
            f"{label} · {n:,}",
            f"<b>{label}</b><br>{_plural(n, 'server')}, {_plural(gpus, 'GPU')}",
            kind,
        )

    for (source, target, kind), value in sorted(values.items()):
        s, t = endpoint(source), endpoint(target)
        sankey.link(
            s,
            t,
            value,
            f"{sankey.labels[s]} → {sankey.labels[t]}: <b>{value:,}</b>"
            + (" bindings" if kind == "binding" else ""),
            kind,
        )
    return sankey


def rack_figure(
    rows: FleetRows,
    *,
    detail_limit: int = RACK_DETAIL_LIMIT,
    max_marks: int = MAX_MARKS,
    server_url: str = "/servers/{id}/",
    rack_url: str = "/servers/?rack={rack}",
) -> Figure:
    """Servers by rack and position (U), coloured by GPU count; a click opens the server.

    Colour is the GPU count rather than the state: state moves with the clock, and this
    figure is cached until the inventory changes (the hover shows the state as rendered).
    Above `detail_limit` racked servers, one bar per rack (GPUs), linking to its servers.
    """
    fleet = _Fleet(rows)
    racked = [s for s in fleet.servers.values() if s["rack"]]
    if not racked:
        return _empty(
            "No server has a rack position yet: set rack and position (U) on the servers."
        )
    racks = sorted({s["rack"] for s in racked}, key=natural_key)
    if len(racked) <= detail_limit:
        return _rack_detail(fleet, racked, racks, server_url)
    return _rack_aggregate(fleet, racked, racks, max_marks, rack_url)


def _rack_detail(
    fleet: _Fleet, racked: list[ServerRow], racks: list[str], server_url: str
) -> Figure:
    placed = sorted(racked, key=lambda s: (natural_key(s["rack"]), s["rack_position"] or 0))
    gpus = [fleet.gpu_total(s["id"]) for s in placed]
    hovers = []
    for s in placed:
        models = ", ".join(
            f"{n} × {esc(m or 'unknown GPU')}" for m, n in sorted(fleet.gpus[s["id"]].items())
        )
        nodes = ", ".join(
            f"{esc(n['cluster'])}/{esc(n['name'])}" for n in fleet.nodes_by_server.get(s["id"], [])
        )
        position = f"U{s['rack_position']}" if s["rack_position"] else "position unknown"
        hovers.append(
            f"<b>{esc(s['hostname'])}</b> {esc(s['model'])}<br>{esc(s['rack'])} {position}"
            f"<br>{models or 'no GPUs'}<br>state: {esc(s['state'])}"
            + (f"<br>nodes: {nodes}" if nodes else "<br>in no scheduler")
        )
    top = max([42, *(s["rack_position"] or 0 for s in placed)])
    labelled = len(placed) <= RACK_LABEL_LIMIT
    return {
        "data": [
            {
                "type": "bar",
                "name": "server",
                "x": [esc(s["rack"]) for s in placed],
                "y": [1] * len(placed),
                "base": [s["rack_position"] or 0 for s in placed],
                "text": [esc(s["hostname"]) for s in placed] if labelled else None,
                "textposition": "inside" if labelled else "none",
                "insidetextanchor": "middle",
                "textangle": 0,
                "customdata": [[server_url.format(id=s["id"])] for s in placed],
                "hovertext": hovers,
                "hovertemplate": "%{hovertext}<extra></extra>",
                "marker": {
                    "color": gpus,
                    "colorscale": GPU_COUNT_SCALE,
                    "cmin": 0,
                    "cmax": max(8, *gpus),
                    "line": {"color": "#14283a", "width": 1},
                    "colorbar": {"title": {"text": "GPUs"}, "thickness": 12},
                },
            }
        ],
        "layout": _layout(
            height=640,
            margin={"l": 10, "r": 10, "t": 36, "b": 10},
            title=_title(
                f"{_plural(len(placed), 'server')} in {_plural(len(racks), 'rack')} · "
                "colour: GPUs · U0: position unknown · click a server to open it"
            ),
            barmode="overlay",
            bargap=0.35,
            xaxis={
                "type": "category",
                "categoryorder": "array",
                "categoryarray": [esc(r) for r in racks],
                "title": {"text": "rack"},
                "automargin": True,
            },
            yaxis={
                "title": {"text": "position (U)"},
                "range": [0, top + 1],
                "dtick": 6,
                "zeroline": False,
                "automargin": True,
            },
            showlegend=False,
            meta={"empty": False, "aggregated": False, "links": True, "marks": len(placed)},
        ),
    }


def _rack_aggregate(
    fleet: _Fleet, racked: list[ServerRow], racks: list[str], max_marks: int, rack_url: str
) -> Figure:
    servers: Counter = Counter()
    gpus: Counter = Counter()
    models: dict[str, Counter] = defaultdict(Counter)
    for s in racked:
        servers[s["rack"]] += 1
        gpus[s["rack"]] += fleet.gpu_total(s["id"])
        models[s["rack"]].update(fleet.gpus[s["id"]])
    shown = racks
    other: list[str] = []
    if len(racks) > max_marks:
        biggest = set(sorted(racks, key=lambda r: (-gpus[r], natural_key(r)))[: max_marks - 1])
        shown = [r for r in racks if r in biggest]
        other = [r for r in racks if r not in biggest]
    x = [esc(r) for r in shown]
    y = [gpus[r] for r in shown]
    hovers = [
        f"<b>rack {esc(r)}</b>: {_plural(servers[r], 'server')}, {_plural(gpus[r], 'GPU')}<br>"
        + ", ".join(f"{n:,} × {esc(m or 'unknown GPU')}" for m, n in models[r].most_common(5))
        + "<br>click to list its servers"
        for r in shown
    ]
    urls = [[rack_url.format(rack=quote(r, safe=""))] for r in shown]
    if other:
        x.append(f"other racks ({len(other):,})")
        y.append(sum(gpus[r] for r in other))
        hovers.append(
            f"<b>{_plural(len(other), 'other rack')}</b>: "
            f"{_plural(sum(servers[r] for r in other), 'server')}, {_plural(y[-1], 'GPU')}"
        )
        urls.append([""])
    return {
        "data": [
            {
                "type": "bar",
                "name": "GPUs per rack",
                "x": x,
                "y": y,
                "customdata": urls,
                "hovertext": hovers,
                "hovertemplate": "%{hovertext}<extra></extra>",
                "marker": {"color": "#2f6f9f"},
            }
        ],
        "layout": _layout(
            height=480,
            margin={"l": 10, "r": 10, "t": 36, "b": 10},
            title=_title(
                f"{_plural(len(racked), 'server')} in {_plural(len(racks), 'rack')}: GPUs per "
                "rack · click a rack to list its servers"
            ),
            xaxis={
                "type": "category",
                "categoryorder": "array",
                "categoryarray": x,
                "title": {"text": "rack"},
                "automargin": True,
            },
            yaxis={"title": {"text": "GPUs"}, "automargin": True},
            showlegend=False,
            bargap=0.1,
            meta={"empty": False, "aggregated": True, "links": True, "marks": len(x)},
        ),
    }


def highlight_gpus(
    figure: Figure, interconnect: Mapping[str, Any], indexes: Iterable[int]
) -> Figure:
    """Outline, on an interconnect matrix figure, the cells between the chosen GPUs.

    Placement links to a server page with the GPUs it chose; this shows which pairs the job
    would use and so which link classes it crosses. Returns a new figure; the input is kept.
    """
    chosen = set(indexes)
    positions = [
        p
        for p, device in enumerate(interconnect["devices"])
        if device["kind"] == "gpu" and device.get("index") in chosen
    ]
    if not positions:
        return figure
    shapes = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "y",
            "layer": "above",
            "x0": x - 0.5,
            "x1": x + 0.5,
            "y0": y - 0.5,
            "y1": y + 0.5,
            "line": {"color": "#1f6feb", "width": 3},
        }
        for x in positions
        for y in positions
        if x != y
    ]
    marker = _legend_swatch("chosen by placement", "#1f6feb", symbol="square-open")
    layout = {**figure["layout"], "shapes": [*figure["layout"].get("shapes", []), *shapes]}
    return {**figure, "data": [*figure["data"], marker], "layout": layout}
