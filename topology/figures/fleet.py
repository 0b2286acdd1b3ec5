"""Fleet figures: the scheduler hierarchy, the server-to-node map, the racks.

They aggregate above their detail limits (see `common.MAX_MARKS`).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from agent.mig import mig_slices, parse_mig_profile
from core.figures import (
    GROUP_COLOURS,
    LINE,
    MAX_MARKS,
    Figure,
    base_layout,
    bottom_legend,
    empty_figure,
    esc,
    figure_title,
    hidden_axes,
    legend_swatch,
    natural_key,
    plural,
)

from .common import (
    HIERARCHY_NODE_LIMIT,
    KIND_COLOURS,
    KIND_NAMES,
    MIG_SECTOR_COLOUR,
    NO_AGENT,
    NO_SCHEDULER,
    SANKEY_DETAIL_LIMIT,
    UNKNOWN_COLOUR,
)


class ServerRow(TypedDict):
    id: int
    hostname: str
    model: str  # the server model: DMI product, else vendor
    rack: str
    rack_position: int | None
    is_virtual: bool
    physical_host_id: int | None
    state: str
    # The worst open finding's severity (critical/warning/info), "" when none; optional.
    health: NotRequired[str]


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


class FleetView:
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
        for mig_row in rows["mig_devices"]:
            if mig_row["server_id"] in self.servers and mig_row["count"]:
                key = (mig_row["server_id"], mig_row["model"] or "")
                self.mig[key][mig_row["profile"] or ""] += mig_row["count"]
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
        self.has_mig = any(self.mig.values())

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
        parts.append(plural(self.gpu_total(server_id), "GPU"))
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
    fleet = FleetView(rows)
    with_gpus = sorted(
        (sid for sid in fleet.gpus if fleet.gpu_total(sid)),
        key=lambda sid: natural_key(fleet.servers[sid]["hostname"]),
    )
    total = sum(fleet.gpu_total(sid) for sid in with_gpus)
    if not total:
        return empty_figure("No GPUs reported yet.")
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
    title = f"{plural(total, 'GPU')} on {plural(servers_with_gpus, 'server')}, by scheduler"
    if aggregated:
        title += " · large groups are shown by server model; click a sector to zoom in"
    elif fleet.orphans:
        title += f" · {plural(len(fleet.orphans), 'node')} without an agent not shown"
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
                # plotly.js picks, per sector, the orientation (horizontal, radial or
                # tangential) that draws its label largest: radial alone shrank long labels
                # to 4 px at 1024 px wide (measured: scale 0.35 radial, 1.0 auto).
                "insidetextorientation": "auto",
            }
        ],
        "layout": base_layout(
            height=600,
            margin={"l": 10, "r": 10, "t": 36, "b": 10},
            title=figure_title(title),
            meta={
                "empty": False,
                "aggregated": aggregated,
                "sectors": len(sectors),
                "min_width": 560,
            },
        ),
    }


def _hierarchy_sectors(
    fleet: FleetView, groups: Mapping[str, list[int]], total: int, mode: str, node_limit: int
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
            "hover": f"<b>{plural(total, 'GPU')}</b> in the inventory",
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
            mig_rows = _mig_values(profiles[model], model, count)
            for profile, instances, value in mig_rows:
                sectors.append(
                    {
                        "id": f"{model_id}/p:{esc(profile)}",
                        "parent": model_id,
                        "label": f"{esc(profile or 'MIG')} × {instances:,}",
                        "value": value,
                        "level": "mig",
                        "count": instances,
                        "hover": f"<b>{plural(instances, 'MIG instance')}</b> "
                        f"{esc(profile)} on {esc(model)}<br>{value:g} GPUs' worth of slices",
                        "colour": MIG_SECTOR_COLOUR,
                    }
                )
            # Close the MIG ring: once any GPU in the figure is in MIG mode, every GPU model
            # sector gets the rest of its ring (whole GPUs, no label), so the outer ring is a
            # full circle instead of MIG wedges sticking out past it.
            rest = _floor4(count - sum(v for _, _, v in mig_rows))
            if fleet.has_mig and rest > 0:
                whole = count - mig_models[model]
                sectors.append(
                    {
                        "id": f"{model_id}/whole",
                        "parent": model_id,
                        "label": "",
                        "value": rest,
                        "level": "whole_gpus",
                        "count": whole,
                        "hover": f"<b>{esc(model or 'unknown GPU')}</b>: "
                        + (
                            f"{plural(whole, 'GPU')} not in MIG mode"
                            if whole
                            else "MIG slices not in an instance"
                        ),
                        "colour": _rgba(colour, 0.35),
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
                "hover": f"<b>{esc(group)}</b><br>{plural(len(members), 'server')}, "
                f"{plural(gpus, 'GPU')}",
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
                        "hover": f"<b>{plural(len(sids), 'server')}</b> {esc(model)}"
                        f"<br>{plural(gpus, 'GPU')}",
                        "colour": colour,
                    }
                )
                add_models(member_id, sids, colour)
    return sectors


SECTOR_LABEL_CHARS = 24
"""A sector label longer than this is cut with an ellipsis (the hover keeps the whole name):
plotly shrinks a label to fit its sector, and an 80-character node name came out at 5 px."""


def _short(text: str, limit: int = SECTOR_LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _member_label(server: ServerRow, nodes: Sequence[NodeRow]) -> str:
    """The node name, and the server's hostname where it differs (each cut to a readable
    length; `_member_hover` has them whole)."""
    hostname = esc(_short(server["hostname"]))
    names = sorted({n["name"] for n in nodes})
    if not names or names == [server["hostname"]]:
        return hostname
    return f"{esc(_short(', '.join(names)))}<br>on {hostname}"


def _member_hover(fleet: FleetView, server_id: int, nodes: Sequence[NodeRow]) -> str:
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
    fleet = FleetView(rows)
    if not fleet.servers and not fleet.orphans:
        return empty_figure("No servers or nodes yet.")
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
        f"{plural(len(fleet.servers), 'server')} → {plural(len(fleet.nodes), 'node')}: "
        f"{plural(bindings, 'binding')}, {unscheduled:,} in no scheduler, "
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
            *(legend_swatch(KIND_NAMES[k], KIND_COLOURS[k]) for k in kinds_present),
        ],
        "layout": base_layout(
            height=max(380, min(1600, 80 + 18 * right_column)),
            margin={"l": 10, "r": 10, "t": 36, "b": 10},
            title=figure_title(title),
            xaxis=hidden_axes(),
            yaxis=hidden_axes(),
            showlegend=True,
            legend=bottom_legend(orientation="h"),
            meta={"empty": False, "aggregated": aggregated, "links": len(sankey.links)},
        ),
    }


def _unscheduled(fleet: FleetView, server_id: int) -> bool:
    return not fleet.nodes_by_server.get(server_id)


def _node_kind(node: NodeRow) -> str:
    return node["kind"] if node["kind"] in KIND_COLOURS else "kubernetes"


def _binding_text(node: NodeRow) -> str:
    method = node.get("binding_method") or ""
    return f" (bound by {esc(method.replace('_', ' '))})" if method else ""


def _server_node_detail(fleet: FleetView) -> _Sankey:
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
                f"<br>advertises {plural(node['gpu_capacity'], 'GPU')}"
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
            f"<br>advertises {plural(node['gpu_capacity'], 'GPU')}<br>no agent reports for it",
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


def _server_node_aggregate(fleet: FleetView, *, by_model: bool) -> _Sankey:
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
                f"{esc(name)} · {plural(n, 'node')}",
                f"<b>{esc(name)}</b> ({esc(kind)})<br>{plural(n, 'node')}",
                kind if kind in KIND_COLOURS else "kubernetes",
            )
        label, kind = labels[key]
        n = len(members[key])
        gpus = sum(fleet.gpu_total(s) for s in members[key])
        return sankey.node(
            key,
            f"{label} · {n:,}",
            f"<b>{label}</b><br>{plural(n, 'server')}, {plural(gpus, 'GPU')}",
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
