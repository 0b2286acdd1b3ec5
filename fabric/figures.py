"""The fabric figure: spines above leaves above servers (grouped by rack), cables coloured by
rail, down and degraded cables marked, bandwidth on hover. Pure: plain facts in, a Plotly
figure dict out (the shape of topology.figures, on the shared drawing of core.figures).

A rail-optimised fabric (NIC k of every server on a leaf of rail k) drawn in detail is not a
hairball of every server to every leaf: it is drawn as what it is, the switch tree above and
below it a grid of servers x rails whose cells name the leaf and port each NIC is cabled to,
coloured by the cable's state and speed, so a wrong rail or a slow cable is one odd cell
(`rail_grid` is that grid as plain data).

Scale: a figure draws at most MAX_MARKS marks (switches, servers, cables). Above that it is
drawn at switch level (servers folded into their leaf, switch-to-switch cables bundled per
pair); above that again, at group level (each tier's switches folded by rail, bundles
between groups). The title says which, and `layout.meta.aggregated` tells the page.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import ceil

from core.figures import (
    LINE,
    MAX_MARKS,
    MUTED,
    Figure,
    base_layout,
    bottom_legend,
    empty_figure,
    esc,
    figure_title,
    hidden_axes,
    legend_swatch,
    natural_key,
)
from core.palette import CRITICAL, NEUTRAL, OK, PALETTE, WARNING, tone_colour

from .graph import tier_name

UP, DOWN, DEGRADED, GONE = "up", "down", "degraded", "gone"
DOWN_COLOUR = tone_colour(CRITICAL)
DEGRADED_COLOUR = tone_colour(WARNING)
SWITCH_COLOUR = "#1f2933"
SERVER_COLOUR = "#6b7280"
TRUNK_COLOUR = LINE
DETAIL, SWITCHES, GROUPS = "detail", "switches", "groups"
LABELLED_SERVERS, SERVER_NAME_PX = 24, 56
"""Up to 24 servers, the detail figure writes each one's name under it, 56 px apart at least."""


RAIL_COLOURS = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#D55E00",  # vermillion
    "#000000",  # black
    "#F0E442",  # yellow
)
"""The rails' colours, the one home of them: Okabe and Ito's eight, which stay apart for
eight rails and for readers with any common colour-vision deficiency; ordered so that a
fabric of 2 or 4 rails gets the most distinct. Down and degraded cables are dotted and
dashed as well as coloured, so a rail's colour is never read as a state."""


def rail_colour(rail: int | None) -> str:
    """A rail's categorical colour: rail 1 the first, and so on (RAIL_COLOURS)."""
    return RAIL_COLOURS[(rail - 1) % len(RAIL_COLOURS)] if rail else TRUNK_COLOUR


@dataclass(frozen=True, slots=True)
class SwitchMark:
    key: str
    name: str
    tier: int | None
    rail: int | None = None
    group: int | None = None
    url: str = ""


@dataclass(frozen=True, slots=True)
class HostMark:
    key: str
    name: str
    rack: str = ""


@dataclass(frozen=True, slots=True)
class CableMark:
    """A cable: `a` a switch key; `b` a switch or host key, "" for a port with nothing up."""

    a: str
    b: str
    speed: str
    gbps: float | None
    state: str = UP
    rail: int | None = None
    label: str = ""
    nic_rail: int | None = None
    """The rail the NIC's own label names (NIC k: rail k), where it is one of the rails."""
    port: int | None = None
    """The switch port (`a`'s) the cable is in."""


@dataclass(frozen=True, slots=True)
class LeafLoad:
    """What a leaf carries when its servers are folded into it (switch level and above)."""

    servers: int
    cables: int
    gbps: float
    down: int = 0
    degraded: int = 0


@dataclass(frozen=True)
class FabricFigureFacts:
    name: str
    switches: Sequence[SwitchMark]
    hosts: Sequence[HostMark] = ()
    cables: Sequence[CableMark] = ()
    leaf_loads: dict[str, LeafLoad] | None = None
    """Given instead of hosts and their cables when the reader already chose switch level."""
    bundles: Sequence[TrunkBundle] | None = None
    """Given instead of the switch-to-switch cables when the reader already summed them per
    pair of switches (switch level and above; `trunk_bundles` is the rule)."""
    rail_optimised: bool = False
    """NIC k of every server on a leaf of rail k (`graph.detect_rails`): drawn as a tree
    and a grid of servers x rails (`rail_grid`) when drawn in detail."""
    rail_names: Mapping[int, str] = field(default_factory=dict)
    """Rail -> the NIC labels on it, for the grid's column heads (`mlx5_0`)."""


@dataclass(frozen=True, slots=True)
class TrunkBundle:
    """The switch-to-switch cables between two switches, summed: what the figure draws at
    switch level and above. `a` <= `b`; `cables` and `gbps` count those up, `down` those
    down or gone, `degraded` those up but slower or narrower than their peers."""

    a: str
    b: str
    cables: int = 0
    gbps: float = 0.0
    down: int = 0
    degraded: int = 0


def level_for(switches: int, hosts: int, cables: int) -> str:
    """How much the figure can show within MAX_MARKS: every server, every switch, or groups."""
    if switches + hosts + cables <= MAX_MARKS:
        return DETAIL
    if switches * 2 <= MAX_MARKS:  # switches and at least as many bundles
        return SWITCHES
    return GROUPS


def _spread(keys: Sequence[str]) -> dict[str, float]:
    n = len(keys)
    return {k: (i + 0.5) / n for i, k in enumerate(keys)}


def _hover_gbps(gbps: float | None) -> str:
    return "rate unknown" if gbps is None else f"{gbps:,.0f} Gb/s"


def _cable_colour(state: str, rail: int | None) -> str:
    if state in (DOWN, GONE):
        return DOWN_COLOUR
    if state == DEGRADED:
        return DEGRADED_COLOUR
    return rail_colour(rail)


def fabric_figure(facts: FabricFigureFacts) -> Figure:
    """The figure of one fabric at the most detail MAX_MARKS allows (see the module)."""
    if not facts.switches:
        return empty_figure(f"Fabric {esc(facts.name)} has no switch yet.")
    if facts.leaf_loads is not None:
        level = SWITCHES if len(facts.switches) * 2 <= MAX_MARKS else GROUPS
    else:
        level = level_for(len(facts.switches), len(facts.hosts), len(facts.cables))
    if level == DETAIL:
        grid = rail_grid(facts) if facts.rail_optimised else None
        if grid is not None:
            return _rail_figure(facts, grid)
        return _detail(facts)
    loads = facts.leaf_loads if facts.leaf_loads is not None else _fold_hosts(facts)
    if facts.bundles is not None:
        bundles = list(facts.bundles)
    else:
        switches = _switch_keys(facts)
        bundles = trunk_bundles(c for c in facts.cables if c.b in switches)
    if level == SWITCHES:
        return _switch_level(facts, bundles, loads)
    return _group_level(facts, bundles, loads)


def trunk_bundles(trunks: Iterable[CableMark]) -> list[TrunkBundle]:
    """Switch-to-switch cables summed per pair of switches, in pair order. A reader may sum
    them in SQL instead (`fabric.selectors`) so that a large fabric's cables never reach Python;
    both must agree."""
    return merge_bundles(
        TrunkBundle(
            cable.a,
            cable.b,
            cables=int(up),
            gbps=(cable.gbps or 0.0) if up else 0.0,
            down=int(not up),
            degraded=int(up and cable.state == DEGRADED),
        )
        for cable in trunks
        for up in [cable.state not in (DOWN, GONE)]
    )


def merge_bundles(parts: Iterable[TrunkBundle]) -> list[TrunkBundle]:
    """Parts summed per unordered pair of switches (a cable from a switch to itself is not
    drawn), in pair order."""
    return _regroup(parts, lambda key: key)


def _switch_keys(facts: FabricFigureFacts) -> set[str]:
    return {s.key for s in facts.switches}


def _fold_hosts(facts: FabricFigureFacts) -> dict[str, LeafLoad]:
    switches = _switch_keys(facts)
    hosts: dict[str, set[str]] = defaultdict(set)
    cables: Counter[str] = Counter()
    gbps: dict[str, float] = {}
    down: Counter[str] = Counter()
    degraded: Counter[str] = Counter()
    for cable in facts.cables:
        if cable.b in switches:
            continue
        if cable.state in (DOWN, GONE):
            down[cable.a] += 1
            continue
        hosts[cable.a].add(cable.b)
        cables[cable.a] += 1
        gbps[cable.a] = gbps.get(cable.a, 0) + (cable.gbps or 0)
        degraded[cable.a] += cable.state == DEGRADED
    keys = set(hosts) | set(down)
    return {
        k: LeafLoad(len(hosts[k]), cables[k], gbps.get(k, 0), down[k], degraded[k]) for k in keys
    }


def _tiers(switches: Iterable[SwitchMark]) -> dict[int, list[SwitchMark]]:
    rows: dict[int, list[SwitchMark]] = defaultdict(list)
    for switch in switches:
        rows[switch.tier or 1].append(switch)
    for members in rows.values():  # a unit's leaves side by side, rails in order within it
        members.sort(key=lambda s: (s.group or 0, s.rail or 0, natural_key(s.name)))
    return rows


def _line_trace(
    segments: list[tuple[float, float, float, float]], colour: str, name: str, dash: str = "solid"
) -> dict:
    xs: list[float | None] = []
    ys: list[float | None] = []
    for x0, y0, x1, y1 in segments:
        xs += [x0, x1, None]
        ys += [y0, y1, None]
    return {
        "type": "scatter",
        "mode": "lines",
        "x": xs,
        "y": ys,
        "line": {"color": colour, "width": 1.2 if dash == "solid" else 1.6, "dash": dash},
        "name": name,
        "hoverinfo": "skip",
        "showlegend": False,
    }


def _hover_points(points: list[tuple[float, float, str]], name: str) -> dict:
    """Invisible markers at each cable's middle, carrying its hover text."""
    return {
        "type": "scatter",
        "mode": "markers",
        "x": [p[0] for p in points],
        "y": [p[1] for p in points],
        "text": [p[2] for p in points],
        "hovertemplate": "%{text}<extra></extra>",
        "marker": {"size": 6, "opacity": 0},
        "name": name,
        "showlegend": False,
    }


def _marker_trace(
    marks: list[tuple[float, float, str, str]], colour: str, name: str, symbol: str, size: int
) -> dict:
    return {
        "type": "scatter",
        "mode": "markers",
        "x": [m[0] for m in marks],
        "y": [m[1] for m in marks],
        "text": [m[2] for m in marks],
        "customdata": [m[3] for m in marks],
        "hovertemplate": "%{text}<extra></extra>",
        "marker": {"symbol": symbol, "size": size, "color": colour, "line": {"width": 0}},
        "name": name,
        "showlegend": False,
    }


def _cable_traces(
    cables: Iterable[CableMark], at: dict[str, tuple[float, float]], hover, stub_y: float
) -> list[dict]:
    """Cables grouped by colour and dash into line traces, and one trace of hover points."""
    groups: dict[tuple[str, str], list[tuple[float, float, float, float]]] = defaultdict(list)
    points = []
    for cable in cables:
        if cable.a not in at:
            continue
        x0, y0 = at[cable.a]
        if cable.b in at:
            x1, y1 = at[cable.b]
        else:  # a port with nothing up: a short stub below its switch
            x1, y1 = x0, y0 - stub_y
        dash = {DOWN: "dot", GONE: "dot", DEGRADED: "dash"}.get(cable.state, "solid")
        groups[(_cable_colour(cable.state, cable.rail), dash)].append((x0, y0, x1, y1))
        points.append(((x0 + x1) / 2, (y0 + y1) / 2, hover(cable)))
    traces = [
        _line_trace(segments, colour, "cables", dash)
        for (colour, dash), segments in sorted(groups.items())
    ]
    if points:
        traces.append(_hover_points(points, "cable details"))
    return traces


def _legend(rails: Iterable[int | None], states: set[str]) -> list[dict]:
    swatches = [
        legend_swatch(f"rail {rail}", rail_colour(rail), "line-ew-open")
        for rail in sorted(r for r in set(rails) if r)
    ]
    swatches.append(legend_swatch("switch-to-switch", TRUNK_COLOUR, "line-ew-open"))
    if DEGRADED in states:
        swatches.append(legend_swatch("slower or narrower than its peers", DEGRADED_COLOUR))
    if states & {DOWN, GONE}:
        swatches.append(legend_swatch("down, or gone since the last snapshot", DOWN_COLOUR))
    return swatches


def _legend_px(traces: list[dict], per_row: int = 3) -> int:
    """The height a horizontal legend of these traces' entries takes, so that the figure
    grows to hold it instead of scrolling it behind its own scrollbar."""
    entries = sum(1 for trace in traces if trace.get("showlegend"))
    return 26 * ceil(entries / per_row) + 8 if entries else 0


def _figure(
    name: str,
    traces: list[dict],
    tiers: int,
    level: str,
    subtitle: str,
    ticks: dict,
    min_width: int = 0,
) -> Figure:
    legend_px = _legend_px(traces)
    servers = 0.0 in ticks
    return {
        "data": traces,
        "layout": base_layout(
            title=figure_title(f"Fabric {esc(name)}: {subtitle}"),
            height=200 + 90 * tiers + legend_px,
            xaxis=hidden_axes(range=[-0.02, 1.02]),
            yaxis={
                "showgrid": False,
                "zeroline": False,
                "fixedrange": True,
                "tickvals": list(ticks),
                "ticktext": list(ticks.values()),
                "tickfont": {"color": MUTED},
                "range": [-0.7 if servers else 0.6, max(ticks) + 0.4],
            },
            showlegend=True,
            legend=bottom_legend("Cables", orientation="h", y=-0.01),
            margin={"l": 70, "r": 10, "t": 30, "b": 10 + legend_px},
            meta={
                "empty": False,
                "aggregated": level != DETAIL,
                "level": level,
                **({"min_width": min_width} if min_width else {}),
            },
        ),
    }


def _tier_ticks(tiers: Iterable[int], servers: bool) -> dict[float, str]:
    ticks: dict[float, str] = {float(t): tier_name(t) for t in sorted(tiers)}
    if servers:
        ticks[0.0] = "servers"
    return ticks


def _switch_hover(switch: SwitchMark, extra: str = "") -> str:
    parts = [f"<b>{esc(switch.name)}</b>", tier_name(switch.tier)]
    if switch.rail:
        parts.append(f"rail {switch.rail}")
    return "<br>".join(parts) + (f"<br>{extra}" if extra else "")


def _cable_hover(names: dict[str, str]):
    def hover(cable: CableMark) -> str:
        far = esc(names.get(cable.b, "nothing up"))
        state = {DOWN: " (down)", GONE: " (gone)", DEGRADED: " (degraded)"}.get(cable.state, "")
        rail = f"<br>rail {cable.rail}" if cable.rail else ""
        label = f"<br>{esc(cable.label)}" if cable.label else ""
        return (
            f"{esc(names.get(cable.a, cable.a))} to {far}{state}<br>"
            f"{esc(cable.speed)}, {_hover_gbps(cable.gbps)}{rail}{label}"
        )

    return hover


def _detail(facts: FabricFigureFacts) -> Figure:
    rows = _tiers(facts.switches)
    at: dict[str, tuple[float, float]] = {}
    for tier, members in rows.items():
        for key, x in _spread([s.key for s in members]).items():
            at[key] = (x, float(tier))
    hosts = sorted(facts.hosts, key=lambda h: (natural_key(h.rack or "~"), natural_key(h.name)))
    for key, x in _spread([h.key for h in hosts]).items():
        at[key] = (x, 0.0)
    names = {s.key: s.name for s in facts.switches} | {h.key: h.name for h in facts.hosts}
    traces = _cable_traces(facts.cables, at, _cable_hover(names), 0.35)
    servers = _marker_trace(
        [(*at[h.key], f"<b>{esc(h.name)}</b><br>rack {esc(h.rack or '—')}", h.key) for h in hosts],
        SERVER_COLOUR,
        "servers",
        "circle",
        7,
    )
    if len(hosts) <= LABELLED_SERVERS:  # named where the names have room to be read
        servers |= {
            "mode": "markers+text",
            "texttemplate": [esc(h.name) for h in hosts],
            "textposition": "bottom center",
            "textfont": {"size": 10, "color": MUTED},
            "cliponaxis": False,
        }
    traces.append(servers)
    switches = _marker_trace(
        [(*at[s.key], _switch_hover(s), s.url) for s in facts.switches],
        SWITCH_COLOUR,
        "switches",
        "square",
        11,
    )
    named = [len(rows[s.tier or 1]) <= NAMED_SWITCHES for s in facts.switches]
    if any(named):  # a tier of few switches names them; a crowded one on hover only
        switches |= {
            "mode": "markers+text",
            "texttemplate": [
                esc(s.name) if n else "" for s, n in zip(facts.switches, named, strict=True)
            ],
            "textposition": [
                "middle right" if (s.tier or 1) == 1 else "top center" for s in facts.switches
            ],
            "textfont": {"size": 10},
            "cliponaxis": False,
        }
    traces.append(switches)
    traces += _legend((c.rail for c in facts.cables), {c.state for c in facts.cables})
    subtitle = f"{len(facts.switches):,} switches, {len(hosts):,} servers by rack"
    # named servers need SERVER_NAME_PX each: narrower screens scroll the figure sideways
    wide = 70 + SERVER_NAME_PX * len(hosts) if len(hosts) <= LABELLED_SERVERS else 0
    ticks = _tier_ticks(rows, True)
    return _figure(facts.name, traces, len(rows), DETAIL, subtitle, ticks, max(wide, 480))


def _load_text(load: LeafLoad | None) -> str:
    if load is None:
        return "no server"
    text = f"{load.servers:,} servers, {load.cables:,} cables, {load.gbps:,.0f} Gb/s down"
    if load.degraded:
        text += f"<br>{load.degraded:,} degraded"
    if load.down:
        text += f"<br>{load.down:,} ports down"
    return text


def _switch_level(
    facts: FabricFigureFacts, pairs: list[TrunkBundle], loads: dict[str, LeafLoad]
) -> Figure:
    rows = _tiers(facts.switches)
    at = {
        key: (x, float(tier))
        for tier, members in rows.items()
        for key, x in _spread([s.key for s in members]).items()
    }
    names = {s.key: s.name for s in facts.switches}
    traces = _bundle_traces(pairs, at, names)
    marked_down = {k for k, load in loads.items() if load.down}
    marked_degraded = {k for k, load in loads.items() if load.degraded} - marked_down
    for keys, colour, name in (
        (marked_degraded, DEGRADED_COLOUR, "leaves with degraded cables"),
        (marked_down, DOWN_COLOUR, "leaves with ports down"),
    ):
        if keys:
            traces.append(
                _marker_trace(
                    [(at[k][0], at[k][1] - 0.18, "", "") for k in sorted(keys) if k in at],
                    colour,
                    name,
                    "triangle-up",
                    7,
                )
            )
    traces.append(
        _marker_trace(
            [
                (*at[s.key], _switch_hover(s, _load_text(loads.get(s.key))), s.url)
                for s in facts.switches
            ],
            SWITCH_COLOUR,
            "switches",
            "square",
            8,
        )
    )
    states = {DOWN} if marked_down else set()
    states |= {DEGRADED} if marked_degraded or any(b.degraded for b in pairs) else set()
    traces += _legend((s.rail for s in facts.switches), states)
    servers = sum(load.servers for load in loads.values())
    subtitle = (
        f"{len(facts.switches):,} switches; {servers:,} servers folded into their leaves "
        f"(over {MAX_MARKS:,} marks)"
    )
    return _figure(facts.name, traces, len(rows), SWITCHES, subtitle, _tier_ticks(rows, False))


def _regroup(parts: Iterable[TrunkBundle], group_of) -> list[TrunkBundle]:
    """Bundles summed per unordered pair of the groups their ends are in, in pair order; ends
    in no group, or both in one, are left out."""
    sums: dict[tuple[str, str], list] = {}
    for part in parts:
        a, b = group_of(part.a), group_of(part.b)
        if a is None or b is None or a == b:
            continue
        found = sums.setdefault((a, b) if a <= b else (b, a), [0, 0.0, 0, 0])
        found[0] += part.cables
        found[1] += part.gbps
        found[2] += part.down
        found[3] += part.degraded
    return [TrunkBundle(a, b, *counts) for (a, b), counts in sorted(sums.items())]


def _bundle_traces(
    bundles: list[TrunkBundle], at: dict[str, tuple[float, float]], names
) -> list[dict]:
    cables = [
        CableMark(
            a=bundle.a,
            b=bundle.b,
            speed=f"{bundle.cables:,} cables",
            gbps=bundle.gbps,
            state=DOWN if bundle.down else DEGRADED if bundle.degraded else UP,
            label=(f"{bundle.down:,} gone or down" if bundle.down else "")
            + (f" {bundle.degraded:,} degraded" if bundle.degraded else ""),
        )
        for bundle in sorted(bundles, key=lambda bundle: (bundle.a, bundle.b))
    ]
    return _cable_traces(cables, at, _cable_hover(names), 0.0)


def _group_level(
    facts: FabricFigureFacts, pairs: list[TrunkBundle], loads: dict[str, LeafLoad]
) -> Figure:
    def group_key(switch: SwitchMark) -> str:
        return f"t{switch.tier or 1}r{switch.rail or 0}"

    groups: dict[str, list[SwitchMark]] = defaultdict(list)
    for switch in facts.switches:
        groups[group_key(switch)].append(switch)
    of = {s.key: group_key(s) for s in facts.switches}
    tiers: dict[int, list[str]] = defaultdict(list)
    for key, members in groups.items():
        tiers[members[0].tier or 1].append(key)
    at = {
        key: (x, float(tier))
        for tier, keys in tiers.items()
        for key, x in _spread(sorted(keys, key=lambda k: groups[k][0].rail or 0)).items()
    }
    names = {}
    marks = []
    for key, members in groups.items():
        first = members[0]
        label = tier_name(first.tier) + (f" rail {first.rail}" if first.rail else "")
        names[key] = f"{label}s"
        folded = [loads[m.key] for m in members if m.key in loads]
        text = f"<b>{len(members):,} {esc(label)} switches</b>"
        if folded:
            text += "<br>" + _load_text(
                LeafLoad(
                    sum(f.servers for f in folded),
                    sum(f.cables for f in folded),
                    sum(f.gbps for f in folded),
                    sum(f.down for f in folded),
                    sum(f.degraded for f in folded),
                )
            )
        marks.append((*at[key], text, ""))
    traces = _bundle_traces(_regroup(pairs, of.get), at, names)
    traces.append(_marker_trace(marks, SWITCH_COLOUR, "switch groups", "square", 14))
    states = {DOWN} if any(load.down for load in loads.values()) else set()
    states |= {DEGRADED} if any(load.degraded for load in loads.values()) else set()
    traces += _legend((), states)
    servers = sum(load.servers for load in loads.values())
    subtitle = (
        f"{len(facts.switches):,} switches folded by tier and rail, {servers:,} servers "
        f"(over {MAX_MARKS:,} marks even at switch level)"
    )
    return _figure(facts.name, traces, len(tiers), GROUPS, subtitle, _tier_ticks(tiers, False))


# -- a rail-optimised fabric: the switch tree above a grid of servers x rails --------------

CELL_OK, CELL_SLOW, CELL_WRONG, CELL_DOWN, CELL_NONE = range(5)
CELL_COLOURS = {
    CELL_OK: PALETTE[OK]["soft"],
    CELL_SLOW: tone_colour(WARNING),
    CELL_WRONG: "#5b3a8c",  # a violet no state takes
    CELL_DOWN: tone_colour(CRITICAL),
    CELL_NONE: PALETTE[NEUTRAL]["soft"],
}
CELL_MEANING = {
    CELL_OK: "up, on its rail's leaf, at its peers' speed",
    CELL_SLOW: "▼ slower or narrower than its peers",
    CELL_WRONG: "⇄ on another rail's leaf (wrong rail)",
    CELL_DOWN: "✕ down, or gone since the last snapshot",
    CELL_NONE: "no cable on this rail",
}
_CELL_MARK = {CELL_SLOW: "▼ ", CELL_WRONG: "⇄ ", CELL_DOWN: "✕ "}
ROW_PX = 22
"""A server row's height in the grid: room for its name and a cell's text."""
NAMED_SWITCHES, NAME_PX = 16, 80
"""Up to 16 switches of a tier are named in the tree, each given 80 px (the figure scrolls
sideways below that); more are named on hover and, leaves, in the grid's cells."""


@dataclass(frozen=True, slots=True)
class RailCell:
    """One server's NIC(s) on one rail: where they are cabled, and how."""

    code: int
    text: str
    hover: str


@dataclass(frozen=True, slots=True)
class RailGrid:
    """Servers (rows, by rack and name) x rails (columns); `cells[row][column]`."""

    hosts: list[HostMark]
    rails: list[int]
    cells: list[list[RailCell]]


def _peer_gbps(cables: Iterable[CableMark]) -> float | None:
    """The speed most server cables up run at: what a slow one is slower than."""
    speeds = Counter(c.gbps for c in cables if c.gbps and c.state not in (DOWN, GONE))
    return speeds.most_common(1)[0][0] if speeds else None


def _cell_code(cable: CableMark, leaf_rail: int | None, column: int, peers: float | None) -> int:
    if cable.state in (DOWN, GONE):
        return CELL_DOWN
    if leaf_rail is not None and leaf_rail != column:
        return CELL_WRONG
    if cable.state == DEGRADED or (peers and cable.gbps is not None and cable.gbps < peers):
        return CELL_SLOW
    return CELL_OK


def rail_grid(facts: FabricFigureFacts) -> RailGrid | None:
    """The servers x rails grid of a rail-optimised fabric, or None where there is none to
    draw (fewer than two rails, no server cabled to a rail, more cells than MAX_MARKS).

    A NIC's column is the rail its label names (NIC k: rail k), else the rail it is on; its
    cell names the leaf and port it is cabled to, and is coded by the cable: down or gone,
    on a leaf of another rail (wrong rail), slower than most server cables (or called
    degraded by a finding), else ok. Two NICs in one cell: both named, the worst code.
    """
    switches = {s.key: s for s in facts.switches}
    rails = sorted({s.rail for s in facts.switches if s.rail and (s.tier or 1) == 1})
    if len(rails) < 2:
        return None
    hosts = {h.key: h for h in facts.hosts}
    edge = [c for c in facts.cables if c.b in hosts and c.a in switches]
    peers = _peer_gbps(edge)
    found: dict[tuple[str, int], list[tuple[int, CableMark]]] = defaultdict(list)
    for cable in edge:
        leaf_rail = switches[cable.a].rail
        column = cable.nic_rail or cable.rail or leaf_rail
        if column not in rails:
            continue
        found[cable.b, column].append((_cell_code(cable, leaf_rail, column, peers), cable))
    on_rails = sorted(
        {host for host, _ in found},
        key=lambda k: (natural_key(hosts[k].rack or "~"), natural_key(hosts[k].name)),
    )
    if not on_rails or len(on_rails) * len(rails) > MAX_MARKS:
        return None
    cells = [
        [
            _rail_cell(hosts[host], rail, found.get((host, rail), []), switches, peers)
            for rail in rails
        ]
        for host in on_rails
    ]
    return RailGrid([hosts[h] for h in on_rails], rails, cells)


def _rail_cell(
    host: HostMark,
    rail: int,
    cables: list[tuple[int, CableMark]],
    switches: Mapping[str, SwitchMark],
    peers: float | None,
) -> RailCell:
    head = f"<b>{esc(host.name)}</b>, rail {rail}"
    if not cables:
        return RailCell(CELL_NONE, "—", f"{head}<br>no cable on this rail")
    code = max(code for code, _ in cables)
    texts, hovers = [], [head]
    for each, cable in sorted(cables, key=lambda found: (found[1].label, found[1].port or 0)):
        leaf = switches[cable.a]
        port = f" p{cable.port}" if cable.port is not None else ""
        texts.append(f"{esc(leaf.name)}{port}")
        state = {DOWN: " (down)", GONE: " (gone since the last snapshot)", DEGRADED: " (degraded)"}
        line = (
            f"{esc(cable.label or 'NIC')} to {esc(leaf.name)}{port.replace(' p', ' port ')}"
            f" (leaf of rail {leaf.rail or '—'})<br>{esc(cable.speed)}, {_hover_gbps(cable.gbps)}"
            + state.get(cable.state, "")
        )
        if each == CELL_WRONG:
            line += f"<br>wrong rail: NIC of rail {rail} on a leaf of rail {leaf.rail}"
        elif each == CELL_SLOW and peers:
            line += f"<br>slower than its peers ({_hover_gbps(peers)})"
        hovers.append(line)
    return RailCell(code, _CELL_MARK.get(code, "") + ", ".join(texts), "<br>".join(hovers))


def _stepped(colours: Mapping[int, str]) -> list[list]:
    """A colourscale that gives each integer code 0..n-1 its own colour, no blend."""
    n = len(colours)
    scale: list[list] = []
    for code in range(n):
        scale += [[code / n, colours[code]], [(code + 1) / n, colours[code]]]
    return scale


def _rail_figure(facts: FabricFigureFacts, grid: RailGrid) -> Figure:
    """The switch tree (switches by tier, named where there is room, leaves coloured by
    rail, switch-to-switch cables) above the servers x rails grid (`rail_grid`)."""
    rows = _tiers(facts.switches)
    at: dict[str, tuple[float, float]] = {}
    for tier, members in rows.items():
        for key, x in _spread([s.key for s in members]).items():
            at[key] = (x, float(tier))
    switches = _switch_keys(facts)
    names = {s.key: s.name for s in facts.switches}
    trunks = [c for c in facts.cables if c.b in switches]
    traces = _cable_traces(trunks, at, _cable_hover(names), 0.0)
    for trace in traces:
        trace.update(xaxis="x", yaxis="y")
    widest = 0  # the most switches named in one tier: each needs NAME_PX
    for tier, members in sorted(rows.items()):
        by_rail: dict[int | None, list[SwitchMark]] = defaultdict(list)
        for switch in members:
            by_rail[switch.rail if tier == 1 else None].append(switch)
        named = len(members) <= NAMED_SWITCHES
        widest = max(widest, len(members) if named else 0)
        for rail, marks in sorted(by_rail.items(), key=lambda item: item[0] or 0):
            trace = _marker_trace(
                [(*at[s.key], _switch_hover(s), s.url) for s in marks],
                rail_colour(rail) if rail else SWITCH_COLOUR,
                f"leaves of rail {rail}" if rail else tier_name(tier),
                "square",
                11,
            )
            trace.update(xaxis="x", yaxis="y")
            if named:
                trace |= {
                    "mode": "markers+text",
                    "texttemplate": [esc(s.name) for s in marks],
                    "textposition": "bottom center" if tier == 1 else "top center",
                    "textfont": {"size": 10},
                    "cliponaxis": False,
                }
            traces.append(trace)
    codes = sorted({cell.code for row in grid.cells for cell in row})
    traces.append(
        {
            "type": "heatmap",
            "xaxis": "x2",
            "yaxis": "y2",
            "x": [_rail_head(rail, facts.rail_names) for rail in grid.rails],
            "y": list(range(len(grid.hosts))),  # by row: two servers may share a name
            "z": [[cell.code for cell in row] for row in grid.cells],
            "text": [[cell.text for cell in row] for row in grid.cells],
            "customdata": [[cell.hover for cell in row] for row in grid.cells],
            "texttemplate": "%{text}",
            "textfont": {"size": 10},
            "hovertemplate": "%{customdata}<extra></extra>",
            "colorscale": _stepped(CELL_COLOURS),
            "zmin": 0,
            "zmax": len(CELL_COLOURS),
            "showscale": False,
            "xgap": 2,
            "ygap": 2,
            "name": "servers x rails",
        }
    )
    traces += [
        legend_swatch(f"leaf of rail {rail}", rail_colour(rail), "square", "rails")
        for rail in grid.rails
    ]
    traces += [
        legend_swatch(CELL_MEANING[code], CELL_COLOURS[code], "square", "cells") for code in codes
    ]
    if any(c.state in (DOWN, GONE) for c in trunks):
        traces.append(legend_swatch("switch-to-switch cable down", DOWN_COLOUR, "line-ew-open"))
    tree_px = 70 + 80 * len(rows)
    grid_px = ROW_PX * len(grid.hosts) + 40
    # the legend's two groups side by side, one entry a line: the longer one sets its height
    legend_px = 19 * max(len(grid.rails), len(codes) + 1) + 16
    height = 40 + tree_px + grid_px + legend_px
    split = grid_px / (tree_px + grid_px)  # of the plot area, the grid's share
    top_tier = max(rows)
    subtitle = (
        f"rail-optimised, {len(grid.rails)} rails; {len(facts.switches):,} switches above, "
        f"{len(grid.hosts):,} servers x {len(grid.rails)} rails below (leaf and port per NIC)"
    )
    return {
        "data": traces,
        "layout": base_layout(
            title=figure_title(f"Fabric {esc(facts.name)}: {subtitle}"),
            height=height,
            xaxis=hidden_axes(range=[-0.02, 1.02], anchor="y"),
            yaxis={
                "domain": [split + 0.02, 1],
                "anchor": "x",
                "showgrid": False,
                "zeroline": False,
                "fixedrange": True,
                "range": [0.45, top_tier + 0.45],
                "tickvals": sorted(rows),
                "ticktext": [tier_name(t) for t in sorted(rows)],
                "tickfont": {"color": MUTED},
            },
            xaxis2={
                "anchor": "y2",
                "side": "top",
                "fixedrange": True,
                "showgrid": False,
                "tickfont": {"size": 11},
            },
            yaxis2={
                "domain": [0, split - 0.04],
                "anchor": "x2",
                "autorange": "reversed",
                "fixedrange": True,
                "showgrid": False,
                "automargin": True,
                "tickfont": {"size": 10},
                "tickvals": list(range(len(grid.hosts))),
                "ticktext": [esc(h.name) for h in grid.hosts],
            },
            showlegend=True,
            legend=bottom_legend("", orientation="h", y=-0.005, traceorder="grouped"),
            margin={"l": 70, "r": 10, "t": 36, "b": 10 + legend_px},
            meta={
                "empty": False,
                "aggregated": False,
                "level": DETAIL,
                "rail_grid": True,
                "min_width": max(160 + 120 * len(grid.rails), 90 + NAME_PX * widest),
            },
        ),
    }


def _rail_head(rail: int, names: Mapping[int, str]) -> str:
    label = names.get(rail)
    return f"rail {rail}" + (f" ({esc(label)})" if label else "")
