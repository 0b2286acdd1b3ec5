"""Per-server figures: the interconnect matrix, the NVLink graph, the MIG layout."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agent.mig import mig_slices, parse_mig_profile
from core.figures import (
    MUTED,
    Figure,
    base_layout,
    bottom_legend,
    empty_figure,
    esc,
    hidden_axes,
    legend_swatch,
    natural_key,
    plural,
    side_legend,
)
from inventory.choices import link_rank

from ..interconnect import describe_link_class, interconnect_matrix
from .common import (
    FREE_SLICE_COLOUR,
    MIG_COLOURS,
    NUMA_COLOURS,
    NVLINK_COLOURS,
    PCIE_COLOURS,
    UNKNOWN_COLOUR,
)


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


def interconnect_matrix_figure(interconnect: Mapping[str, Any]) -> Figure:
    """`nvidia-smi topo -m` as a coloured grid: one cell per device pair, fastest green.

    Expects `topology.interconnect.server_interconnect(...)`'s dict. Every class present gets
    a legend entry in plain words, fastest first.
    """
    devices = list(interconnect.get("devices") or [])
    if not devices:
        return empty_figure("No GPUs or NICs reported: there is no interconnect to show.")
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
        legend_swatch(f"<b>{esc(c)}</b> {esc(describe_link_class(c))}", colour)
        for c, colour in palette
    ]
    size = len(devices)
    heatmap["textfont"] = {"size": matrix_cell_font_size(size)}
    return {
        "data": [heatmap, *legend_traces],
        "layout": base_layout(
            height=120 + MATRIX_MIN_CELL_PX * size + 22 * (len(palette) + 1),
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
            legend=bottom_legend("Link classes, fastest first"),
            meta={
                "empty": False,
                "aggregated": False,
                "classes": [esc(c) for c, _ in palette],
                "min_width": matrix_min_width(size),
            },
        ),
    }


MATRIX_MIN_CELL_PX = 40
"""A cell wide and tall enough for `NODE` or `NV18` at the cell font size, inside the cell."""


def matrix_cell_font_size(devices: int) -> int:
    """Smaller cell text as the matrix grows; never below 10 px (legible)."""
    return 12 if devices <= 12 else 11 if devices <= 20 else 10


def matrix_min_width(devices: int) -> int:
    """The width (px) under which cells would be narrower than MATRIX_MIN_CELL_PX: the page
    keeps the figure at least this wide and scrolls it instead (static/js/figures.js)."""
    return 160 + MATRIX_MIN_CELL_PX * devices


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
        return empty_figure("No GPUs reported: there is no NVLink graph to show.")
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
    if not nvlink_pairs:
        return pcie_tree_figure(interconnect, include_nics=include_nics)
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
                f"<b>{esc(key)}</b> to the NVSwitch fabric: {plural(count, 'NVLink')}<br>"
                f"NV{count} to {plural(len(peers), 'GPU')} through "
                f"{plural(switches, 'NVSwitch', 'NVSwitches')}"
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
        name = f"NV{count}: {plural(count, 'NVLink')}" + (
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
                "text": [f"{plural(switches, 'NVSwitch', 'NVSwitches')}"],
                "textposition": "bottom center",
                "marker": {"symbol": "diamond", "size": 34, "color": "#14283a"},
                "hovertext": [
                    f"<b>{plural(switches, 'NVSwitch', 'NVSwitches')}</b><br>every GPU's "
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

    return {
        "data": data,
        "layout": base_layout(
            height=540,
            margin={"l": 10, "r": 10, "t": 30, "b": 10},
            xaxis=hidden_axes(range=[-1.9, 1.9]),
            yaxis=hidden_axes(range=[-1.75, 1.75], scaleanchor="x", scaleratio=1),
            showlegend=True,
            legend=side_legend(),
            meta={
                "empty": False,
                "aggregated": False,
                "nvswitch_hub": hub,
                "nvlink": True,
                "min_width": 560,
            },
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
    # nic -> (rank, gpu key, class); a link that names no NIC end is kept under None.
    best: dict[str | None, tuple[int, str, str]] = {}
    for link in links:
        a, b, link_class = link.get("a"), link.get("b"), link.get("link_class") or ""
        if a is not None and a in gpu_by_key and b not in gpu_by_key:
            gpu, nic = a, b
        elif b is not None and b in gpu_by_key and a not in gpu_by_key:
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
        return empty_figure("No GPU is in MIG mode.")
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
            gi = device.get("gpu_instance_id")
            # a device whose instance a partial source did not give stands alone
            instances[gi if gi is not None else f"? ({device.get('uuid')})"].append(device)
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
        "layout": base_layout(
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
            legend=side_legend("GPU instance profiles"),
            annotations=annotations,
            meta={"empty": False, "aggregated": False, "unplaced": len(unplaced)},
        ),
    }


def highlight_gpus(
    figure: Figure,
    interconnect: Mapping[str, Any],
    indexes: Iterable[int],
    *,
    label: str = "chosen by placement",
) -> Figure:
    """Outline, on an interconnect matrix figure, the cells between the chosen GPUs.

    Placement links to a server page with the GPUs it chose, and a workload's page draws the
    GPUs it holds (`label` names which); this shows which pairs the job uses and so which
    link classes it crosses. Returns a new figure; the input is kept.
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
    marker = legend_swatch(esc(label), "#1f6feb", symbol="square-open")
    layout = {**figure["layout"], "shapes": [*figure["layout"].get("shapes", []), *shapes]}
    return {**figure, "data": [*figure["data"], marker], "layout": layout}


def _pcie_groups(keys: Sequence[str], links: Iterable[Mapping[str, Any]]) -> list[list[str]]:
    """Devices that share a PCIe switch (PIX or PXB between them), by union-find; a device
    with no such peer is a group of its own (behind a host bridge)."""
    parent = {k: k for k in keys}

    def root(k: str) -> str:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for link in links:
        a, b = link.get("a"), link.get("b")
        if a in parent and b in parent and (link.get("link_class") or "") in ("PIX", "PXB"):
            parent[root(a)] = root(b)
    groups: dict[str, list[str]] = defaultdict(list)
    for k in keys:
        groups[root(k)].append(k)
    return list(groups.values())


def pcie_tree_figure(interconnect: Mapping[str, Any], *, include_nics: bool = True) -> Figure:
    """Without NVLink, the PCIe tree: NUMA node (CPU socket) -> PCIe switch or host bridge ->
    GPUs and NICs, so a server such as 4 x L40S shows how its GPUs reach each other and the
    network, and says plainly that no NVLink joins them."""
    devices = [
        d
        for d in interconnect.get("devices") or []
        if d.get("kind") == "gpu" or (include_nics and d.get("kind") == "nic")
    ]
    gpu_count = sum(1 for d in devices if d.get("kind") == "gpu")
    by_key = {d["key"]: d for d in devices}
    numas: dict[object, list[str]] = defaultdict(list)
    for d in sorted(
        devices,
        key=lambda d: (_numa_key(d.get("numa_node")), d.get("kind") != "gpu", d.get("index") or 0),
    ):
        numas[d.get("numa_node")].append(d["key"])
    links = list(interconnect.get("links") or [])
    leaf_x: dict[str, float] = {}
    edges_x: list[float | None] = []
    edges_y: list[float | None] = []
    hubs: dict[str, list] = {"x": [], "y": [], "text": [], "hover": []}
    numa_marks: dict[str, list] = {"x": [], "y": [], "text": [], "hover": []}
    column: float = 0
    for numa in sorted(numas, key=_numa_key):
        hub_xs = []
        for group in _pcie_groups(numas[numa], links):
            xs = []
            for key in group:
                leaf_x[key] = float(column)
                xs.append(float(column))
                column += 1
            hub_x = sum(xs) / len(xs)
            switch = len(group) > 1
            hubs["x"].append(hub_x)
            hubs["y"].append(1.0)
            hubs["text"].append("PCIe switch" if switch else "host bridge")
            hubs["hover"].append(
                ("<b>PCIe switch</b>: " if switch else "<b>host bridge</b>: ")
                + ", ".join(esc(k) for k in group)
            )
            for x in xs:
                edges_x += [hub_x, x, None]
                edges_y += [1.0, 0.0, None]
            hub_xs.append(hub_x)
            column += 0.5
        numa_x = sum(hub_xs) / len(hub_xs)
        for x in hub_xs:
            edges_x += [numa_x, x, None]
            edges_y += [2.0, 1.0, None]
        numa_marks["x"].append(numa_x)
        numa_marks["y"].append(2.0)
        numa_marks["text"].append(_numa_name(numa))
        numa_marks["hover"].append(_numa_name(numa) + " (CPU socket and its root ports)")
        column += 1
    data: list[dict] = [
        {
            "type": "scatter",
            "mode": "lines",
            "x": edges_x,
            "y": edges_y,
            "line": {"width": 1.5, "color": "#8a97a6"},
            "name": "PCIe",
            "hoverinfo": "skip",
            "showlegend": False,
        },
        {
            "type": "scatter",
            "mode": "markers+text",
            "x": numa_marks["x"],
            "y": numa_marks["y"],
            "text": numa_marks["text"],
            "textposition": "top center",
            "marker": {"symbol": "square", "size": 16, "color": "#14283a"},
            "hovertext": numa_marks["hover"],
            "hovertemplate": "%{hovertext}<extra></extra>",
            "name": "NUMA node (CPU socket)",
        },
        {
            "type": "scatter",
            "mode": "markers+text",
            "x": hubs["x"],
            "y": hubs["y"],
            "text": hubs["text"],
            "textposition": "middle right",
            "textfont": {"size": 11, "color": MUTED},
            "marker": {"symbol": "diamond", "size": 14, "color": MUTED},
            "hovertext": hubs["hover"],
            "hovertemplate": "%{hovertext}<extra></extra>",
            "name": "PCIe switch or host bridge",
        },
    ]
    for kind, name, symbol, colour in (
        ("gpu", "GPU", "circle", NUMA_COLOURS[0]),
        ("nic", "NIC", "square", MUTED),
    ):
        keys = [k for k in leaf_x if by_key[k].get("kind") == kind]
        if not keys:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "markers+text",
                "x": [leaf_x[k] for k in keys],
                "y": [0.0] * len(keys),
                "text": [esc(k) for k in keys],
                "textposition": "bottom center",
                "marker": {"symbol": symbol, "size": 22 if kind == "gpu" else 14, "color": colour},
                "hovertext": [_device_label(by_key[k]) for k in keys],
                "hovertemplate": "%{hovertext}<extra></extra>",
                "name": name,
            }
        )
    return {
        "data": data,
        "layout": base_layout(
            height=360,
            margin={"l": 10, "r": 10, "t": 60, "b": 10},
            title={
                "text": f"No NVLink between these {plural(gpu_count, 'GPU')}: they reach each "
                "other over PCIe,<br>through the switches and host bridges below (the matrix "
                "gives each pair's path).",
                "x": 0,
                "xanchor": "left",
                "font": {"size": 13, "color": MUTED},
            },
            xaxis=hidden_axes(range=[-0.8, max(column - 0.5, 1.0)]),
            yaxis=hidden_axes(range=[-0.6, 2.6]),
            showlegend=True,
            legend=bottom_legend(),
            meta={
                "empty": False,
                "aggregated": False,
                "nvlink": False,
                "nvswitch_hub": False,
                "min_width": max(480, 90 * int(column)),
            },
        ),
    }
