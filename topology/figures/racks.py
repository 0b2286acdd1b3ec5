"""Rack elevations: servers at their rack position and chassis height, coloured by health."""

from __future__ import annotations

from collections import Counter, defaultdict
from urllib.parse import quote

from core.figures import (
    MAX_MARKS,
    Figure,
    base_layout,
    empty_figure,
    esc,
    figure_title,
    legend_swatch,
    natural_key,
    plural,
    side_legend,
)
from core.palette import CRITICAL, INFO, NEUTRAL, OK, WARNING, tone_colour
from inventory.chassis import chassis_height_u

from .common import (
    RACK_DETAIL_LIMIT,
    RACK_LABEL_LIMIT,
)
from .fleet import FleetRows, FleetView, ServerRow


def rack_figure(
    rows: FleetRows,
    *,
    detail_limit: int = RACK_DETAIL_LIMIT,
    max_marks: int = MAX_MARKS,
    server_url: str = "/servers/{id}/",
    rack_url: str = "/servers/?rack={rack}",
) -> Figure:
    """Rack elevations: each server at its position and chassis height (U), coloured by its
    health (the worst open finding, in the state palette); a click opens the server.

    Health rather than state: state moves with the clock and this figure is cached until the
    inventory, the node sets or a reconciliation change, which is when findings change.
    Above `detail_limit` racked servers, one bar per rack (GPUs), linking to its servers.
    """
    fleet = FleetView(rows)
    racked = [s for s in fleet.servers.values() if s["rack"]]
    if not racked:
        return empty_figure(
            "No server has a rack position yet: set rack and position (U) on the servers."
        )
    racks = sorted({s["rack"] for s in racked}, key=natural_key)
    if len(racked) <= detail_limit:
        return _rack_detail(fleet, racked, racks, server_url)
    return _rack_aggregate(fleet, racked, racks, max_marks, rack_url)


HEALTH_TONES = {"critical": CRITICAL, "warning": WARNING, "info": INFO, "": OK}
HEALTH_NAMES = {
    CRITICAL: "critical finding open",
    WARNING: "warning open",
    INFO: "information only",
    OK: "no open finding",
}


def _rack_detail(
    fleet: FleetView, racked: list[ServerRow], racks: list[str], server_url: str
) -> Figure:
    placed = sorted(racked, key=lambda s: (natural_key(s["rack"]), s["rack_position"] or 0))
    heights = [chassis_height_u(s["model"]) for s in placed]
    tones = [HEALTH_TONES.get(s.get("health") or "", NEUTRAL) for s in placed]
    hovers = []
    for s, (units, known), tone in zip(placed, heights, tones, strict=True):
        models = ", ".join(
            f"{n} × {esc(m or 'unknown GPU')}" for m, n in sorted(fleet.gpus[s["id"]].items())
        )
        nodes = ", ".join(
            f"{esc(n['cluster'])}/{esc(n['name'])}" for n in fleet.nodes_by_server.get(s["id"], [])
        )
        position = f"U{s['rack_position']}" if s["rack_position"] else "position unknown"
        size = f"{units}U" if known else f"height unknown, drawn {units}U"
        hovers.append(
            f"<b>{esc(s['hostname'])}</b> {esc(s['model'])}<br>{esc(s['rack'])} {position}"
            f" · {size}<br>{models or 'no GPUs'}<br>health: {HEALTH_NAMES.get(tone, 'unknown')}"
            f" · state: {esc(s['state'])}"
            + (f"<br>nodes: {nodes}" if nodes else "<br>in no scheduler")
        )
    lanes, overlaps = _lanes(placed, [h for h, _ in heights])
    for i, others in overlaps.items():
        hovers[i] += (
            "<br>overlaps "
            + ", ".join(esc(placed[j]["hostname"]) for j in others)
            + (" (their positions and heights cannot both be right): drawn side by side")
        )
    top = max(
        [
            42,
            *((s["rack_position"] or 0) + h - 1 for s, (h, _) in zip(placed, heights, strict=True)),
        ]
    )
    labelled = len(placed) <= RACK_LABEL_LIMIT
    present = [t for t in (CRITICAL, WARNING, INFO, OK, NEUTRAL) if t in tones]
    return {
        "data": [
            {
                "type": "bar",
                "name": "server",
                "x": [esc(s["rack"]) for s in placed],
                "y": [units for units, _ in heights],
                "base": [s["rack_position"] or 0 for s in placed],
                "text": [esc(s["hostname"]) for s in placed] if labelled else None,
                "textposition": "inside" if labelled else "none",
                "insidetextanchor": "middle",
                "textangle": 0,
                "textfont": {"color": "#ffffff"},
                "customdata": [
                    [server_url.format(id=s["id"]), t] for s, t in zip(placed, tones, strict=True)
                ],
                "hovertext": hovers,
                "hovertemplate": "%{hovertext}<extra></extra>",
                "width": [RACK_BAR / n for _, n in lanes],
                "offset": [-RACK_BAR / 2 + lane * RACK_BAR / n for lane, n in lanes],
                "marker": {
                    "color": [tone_colour(t) for t in tones],
                    "line": {
                        "color": [
                            OVERLAP_LINE if i in overlaps else "#14283a" for i in range(len(placed))
                        ],
                        "width": [3 if i in overlaps else 1 for i in range(len(placed))],
                    },
                },
                "showlegend": False,
            },
            *(legend_swatch(HEALTH_NAMES.get(t, "unknown"), tone_colour(t)) for t in present),
            *([legend_swatch(OVERLAP_NAME, OVERLAP_LINE, "square-open")] if overlaps else []),
        ],
        "layout": base_layout(
            height=max(640, 14 * (top + 1) + 80),
            margin={"l": 10, "r": 10, "t": 36, "b": 10},
            title=figure_title(
                f"{plural(len(placed), 'server')} in {plural(len(racks), 'rack')} · "
                "height: the chassis in U · colour: worst open finding · click a server"
            ),
            barmode="overlay",
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
            showlegend=True,
            legend=side_legend("Health"),
            meta={
                "empty": False,
                "aggregated": False,
                "links": True,
                "marks": len(placed),
                "min_width": 480,
            },
        ),
    }


RACK_BAR = 0.7
"""A rack's column width (of its category); chassis that overlap share it side by side."""
OVERLAP_LINE = tone_colour(WARNING)
OVERLAP_NAME = "overlaps another chassis (drawn side by side)"


def _lanes(
    placed: list[ServerRow], heights: list[int]
) -> tuple[list[tuple[int, int]], dict[int, list[int]]]:
    """Per server, (its lane, the lanes of its rack): chassis whose U ranges overlap in one
    rack (an 8U DGX set 4U above another) go side by side instead of on top of each other,
    so none hides another or its name; and which servers each overlaps."""
    spans: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for i, (server, units) in enumerate(zip(placed, heights, strict=True)):
        start = server["rack_position"] or 0
        spans[server["rack"]].append((start, start + units, i))
    lane_of: dict[int, int] = {}
    width: dict[str, int] = {}
    overlaps: dict[int, list[int]] = defaultdict(list)
    for rack, members in spans.items():
        ends: list[int] = []  # per lane, where its last chassis ends
        for start, end, i in sorted(members):
            lane = next((n for n, last in enumerate(ends) if last <= start), len(ends))
            if lane == len(ends):
                ends.append(end)
            else:
                ends[lane] = end
            lane_of[i] = lane
            for other_start, other_end, j in members:
                if j != i and other_start < end and start < other_end:
                    overlaps[i].append(j)
        width[rack] = len(ends)
    return [(lane_of[i], width[s["rack"]]) for i, s in enumerate(placed)], dict(overlaps)


def _rack_aggregate(
    fleet: FleetView, racked: list[ServerRow], racks: list[str], max_marks: int, rack_url: str
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
        f"<b>rack {esc(r)}</b>: {plural(servers[r], 'server')}, {plural(gpus[r], 'GPU')}<br>"
        + ", ".join(f"{n:,} × {esc(m or 'unknown GPU')}" for m, n in models[r].most_common(5))
        + "<br>click to list its servers"
        for r in shown
    ]
    urls = [[rack_url.format(rack=quote(r, safe=""))] for r in shown]
    if other:
        x.append(f"other racks ({len(other):,})")
        y.append(sum(gpus[r] for r in other))
        hovers.append(
            f"<b>{plural(len(other), 'other rack')}</b>: "
            f"{plural(sum(servers[r] for r in other), 'server')}, {plural(y[-1], 'GPU')}"
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
        "layout": base_layout(
            height=480,
            margin={"l": 10, "r": 10, "t": 36, "b": 10},
            title=figure_title(
                f"{plural(len(racked), 'server')} in {plural(len(racks), 'rack')}: GPUs per "
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
