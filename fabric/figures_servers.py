"""A few servers on the fabric (a workload's): their leaves and the spines above those
leaves, the switches and cables on the paths between the servers highlighted, the rest faint,
and the hops named in the title. Pure: plain facts in, a Plotly figure dict out.

Drawn with the fabric figure's own layout and trace builders (`fabric.figures`), so there is
one drawing of the fabric: tiers as rows, servers below, cables coloured by rail. Which
switches lie on the paths follows the one hop rule (`fabric.places`): two servers that share
a leaf meet on it (1 switch); two that share none meet through the spines cabled to a leaf of
each (3 switches); none of those drawn: through switches above them (5).

Bound: at most MAX_SERVERS servers and MAX_SWITCHES switches are drawn (the paths' switches
first); the title says what was left out.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from core.figures import MUTED, Figure, empty_figure, esc, legend_swatch, natural_key, plural

from .figures import (
    DETAIL,
    DOWN,
    GONE,
    LABELLED_SERVERS,
    NAMED_SWITCHES,
    SERVER_NAME_PX,
    SWITCH_COLOUR,
    CableMark,
    FabricFigureFacts,
    SwitchMark,
    _cable_hover,
    _cable_traces,
    _figure,
    _legend,
    _marker_trace,
    _spread,
    _switch_hover,
    _tier_ticks,
    _tiers,
)
from .places import between

MAX_SWITCHES = 60
"""Switches drawn at most: a workload's leaves and the spines above them, paths first."""
MAX_SERVERS = LABELLED_SERVERS
"""Servers drawn at most, each named with its GPUs (a larger workload: the first by name)."""
HELD_COLOUR = "#1f6feb"
"""The workload's marks: the colour its GPUs are outlined in on the interconnect matrix."""
FAINT = 0.25
NO_FABRIC = "no fabric known for these servers"


@dataclass(frozen=True)
class ServersOnFabric:
    """One fabric's switches and cables around some servers (`facts.hosts`, keyed as the
    fabric figure keys them), the GPUs each holds, and how many asked for are on no cable of
    this fabric (`elsewhere`)."""

    facts: FabricFigureFacts
    gpus: Mapping[str, int]
    elsewhere: int = 0


@dataclass(frozen=True)
class Paths:
    """The switches and cables between the servers, and the hops (None: beyond the spines)."""

    switches: set[str]
    cables: set[tuple[str, str]]
    hops: int | None
    shared_leaves: list[str]
    spines: list[str]


def _up(cable: CableMark) -> bool:
    return cable.state not in (DOWN, GONE)


def server_paths(facts: FabricFigureFacts) -> Paths:
    """Which switches and cables carry traffic between the servers, by the hop rule: every
    leaf a server is cabled to (up) carries its traffic; spines carry it between servers
    that share no leaf, those spines cabled to a leaf of each."""
    tier = {s.key: s.tier or 1 for s in facts.switches}
    hosts = {h.key for h in facts.hosts}
    leaves_of: dict[str, set[str]] = defaultdict(set)
    for cable in facts.cables:
        if cable.b in hosts and cable.a in tier and _up(cable):
            leaves_of[cable.b].add(cable.a)
    above: dict[str, set[str]] = defaultdict(set)  # leaf -> spines cabled up from it
    for cable in facts.cables:
        if cable.a in tier and cable.b in tier and _up(cable) and tier[cable.a] != tier[cable.b]:
            low, high = sorted((cable.a, cable.b), key=tier.__getitem__)
            above[low].add(high)
    switches = set().union(*leaves_of.values()) if leaves_of else set()
    cables = {(c.a, c.b) for c in facts.cables if c.b in leaves_of and c.a in switches}
    spines: set[str] = set()
    hops: int | None = 0 if len(hosts) <= 1 else 1
    sets = sorted({frozenset(leaves) for leaves in leaves_of.values()}, key=sorted)
    if len(leaves_of) < len(hosts) and len(hosts) > 1:
        hops = None  # a server on no leaf: no path known
    for i, first in enumerate(sets):
        for second in sets[i + 1 :]:
            if first & second:
                continue
            joined = False
            for a in first:
                for b in second:
                    for spine in above[a] & above[b]:
                        joined = True
                        spines.add(spine)
                        cables |= {(a, spine), (spine, a), (b, spine), (spine, b)}
            hops = None if not joined or hops is None else max(hops, 3)
    shared = set.intersection(*map(set, sets)) if sets else set()
    names = {s.key: s.name for s in facts.switches}
    return Paths(
        switches=switches | spines,
        cables=cables,
        hops=hops,
        shared_leaves=sorted((names[k] for k in shared), key=natural_key),
        spines=sorted((names[k] for k in spines), key=natural_key),
    )


def name_range(names: Sequence[str]) -> str:
    """`ib-leaf-r1…r8` for a run of names numbered one after the other, else the names (the
    first three and how many more). Not escaped."""
    if len(names) <= 1:
        return "".join(names)
    found = [m for name in names if (m := re.fullmatch(r"(.*?)(\d+)", name))]
    if len(found) == len(names) and len({m.group(1) for m in found}) == 1:
        numbers = [int(m.group(2)) for m in found]
        if numbers == list(range(numbers[0], numbers[0] + len(numbers))):
            tail = re.findall(r"[^\W\d_]*$", found[0].group(1))[0]  # the letters before it
            return f"{names[0]}…{tail}{found[-1].group(2)}"
    if len(names) <= 3:
        return ", ".join(names)
    return f"{', '.join(names[:3])} and {len(names) - 3} more"


def hops_words(on: ServersOnFabric, paths: Paths) -> str:
    """The hops in words (not escaped): `2 servers under one leaf: ib-leaf-r1…r8 (8 rails),
    1 switch between them`, `… across spines ib-spine-1…2`."""
    facts = on.facts
    servers = plural(len(facts.hosts), "server")
    leaves = [s for s in facts.switches if s.key in paths.switches and (s.tier or 1) == 1]
    if paths.hops == 0:
        return f"{servers}: no switch between its GPUs"
    if paths.hops == 1 and paths.shared_leaves:
        rails = {s.rail for s in leaves if s.rail and s.name in paths.shared_leaves}
        text = f"{servers} under one leaf: {name_range(paths.shared_leaves)}"
        text += f" ({len(rails)} rails)" if len(rails) > 1 else ""
    else:
        text = f"{servers} under {plural(len(leaves), 'leaf', 'leaves')}"
        if paths.spines:
            spine = "spine" if len(paths.spines) == 1 else "spines"
            text += f", across {spine} {name_range(paths.spines)}"
        if paths.hops is None:
            text += ", and through switches not drawn"
    return text + (f", {between(paths.hops)}" if paths.hops else "")


def _bounded(on: ServersOnFabric, paths: Paths) -> tuple[FabricFigureFacts, list[str]]:
    """The facts cut to MAX_SERVERS servers and MAX_SWITCHES switches, and what was cut."""
    facts = on.facts
    hosts = sorted(facts.hosts, key=lambda h: natural_key(h.name))[:MAX_SERVERS]
    kept_hosts = {h.key for h in hosts}
    serving = {c.a for c in facts.cables if c.b in kept_hosts}
    wanted = [s for s in facts.switches if (s.tier or 1) > 1 or s.key in serving]
    # the paths' spines first (few, and they join the leaves), then their leaves, then the rest
    wanted.sort(key=lambda s: (s.key not in paths.switches, -(s.tier or 1), natural_key(s.name)))
    switches = wanted[:MAX_SWITCHES]
    kept = {s.key for s in switches} | kept_hosts
    cut = []
    if len(hosts) < len(facts.hosts):
        cut.append(f"the first {len(hosts)} of {len(facts.hosts):,} servers")
    if len(switches) < len(wanted):
        cut.append(f"{len(switches)} of {len(wanted):,} switches")
    cables = [c for c in facts.cables if c.a in kept and (c.b in kept or not c.b)]
    cables = [c for c in cables if c.b or c.a in serving]
    return FabricFigureFacts(facts.name, switches, hosts, cables), cut


def servers_fabric_figure(on: ServersOnFabric) -> Figure:
    """Some servers (a workload's) on one fabric, their paths highlighted (see the module)."""
    if not on.facts.hosts or not on.facts.switches:
        return empty_figure(NO_FABRIC[0].upper() + NO_FABRIC[1:] + ".")
    paths = server_paths(on.facts)
    facts, cut = _bounded(on, paths)
    rows = _tiers(facts.switches)
    at: dict[str, tuple[float, float]] = {}
    for tier, members in rows.items():
        for key, x in _spread([s.key for s in members]).items():
            at[key] = (x, float(tier))
    hosts = list(facts.hosts)
    for key, x in _spread([h.key for h in hosts]).items():
        at[key] = (x, 0.0)
    names = {s.key: s.name for s in facts.switches} | {h.key: h.name for h in hosts}
    hover = _cable_hover(names)
    on_path = [c for c in facts.cables if (c.a, c.b) in paths.cables or not _up(c)]
    off_path = [c for c in facts.cables if c not in on_path]
    traces = _cable_traces(on_path, at, hover, 0.35)
    for trace in (faint := _cable_traces(off_path, at, hover, 0.35)):
        trace["opacity"] = FAINT
    traces += faint
    labels = [f"{esc(h.name)}: {plural(on.gpus.get(h.key, 0), 'GPU')}" for h in hosts]
    servers = _marker_trace(
        [
            (*at[h.key], f"<b>{label}</b><br>rack {esc(h.rack or '—')}", h.key)
            for h, label in zip(hosts, labels, strict=True)
        ],
        HELD_COLOUR,
        "the workload's servers",
        "circle",
        10,
    )
    servers |= {
        "mode": "markers+text",
        "texttemplate": labels,
        "textposition": "bottom center",
        "textfont": {"size": 10, "color": MUTED},
        "cliponaxis": False,
    }
    traces.append(servers)
    for lit, marks in (
        (True, [s for s in facts.switches if s.key in paths.switches]),
        (False, [s for s in facts.switches if s.key not in paths.switches]),
    ):
        if marks:
            traces.append(_switches_trace(marks, rows, at, lit))
    traces += _legend((c.rail for c in on_path), {c.state for c in facts.cables})
    traces.append(legend_swatch("on the paths between its servers", HELD_COLOUR, "square-open"))
    if off_path or len(paths.switches) < len(facts.switches):
        traces.append(legend_swatch("off those paths", SWITCH_COLOUR, "square", "faint"))
        traces[-1]["opacity"] = FAINT
    subtitle = esc(hops_words(on, paths))
    if on.elsewhere:
        subtitle += f"; {plural(on.elsewhere, 'server')} on no cable of this fabric"
    if cut:
        subtitle += f" (drawn: {', '.join(cut)})"
    wide = 70 + 2 * SERVER_NAME_PX * len(hosts)
    figure = _figure(facts.name, traces, len(rows), DETAIL, subtitle, _tier_ticks(rows, True))
    figure["layout"]["meta"] |= {"hops": paths.hops, "cut": bool(cut), "min_width": max(wide, 480)}
    return figure


def _switches_trace(
    marks: Iterable[SwitchMark],
    rows: Mapping[int, list[SwitchMark]],
    at: Mapping[str, tuple[float, float]],
    lit: bool,
) -> dict:
    """Switches on the paths outlined in the workload's colour; the others faint."""
    marks = list(marks)
    trace = _marker_trace(
        [(*at[s.key], _switch_hover(s), s.url) for s in marks],
        SWITCH_COLOUR,
        "switches on its paths" if lit else "other switches",
        "square",
        12 if lit else 10,
    )
    if lit:
        trace["marker"]["line"] = {"width": 2.5, "color": HELD_COLOUR}
    else:
        trace["opacity"] = FAINT
    named = [len(rows[s.tier or 1]) <= NAMED_SWITCHES for s in marks]
    if any(named):
        trace |= {
            "mode": "markers+text",
            "texttemplate": [esc(s.name) if n else "" for s, n in zip(marks, named, strict=True)],
            "textposition": ["middle right" if (s.tier or 1) == 1 else "top center" for s in marks],
            "textfont": {"size": 10},
            "cliponaxis": False,
        }
    return trace
