"""A workload's servers on the fabric, drawn from plain facts (no database): the paths
between them outlined by the hop rule, each server named with its GPUs, the hops named in
the title, hostile names escaped, the figure bounded."""

from __future__ import annotations

import json

import plotly.graph_objects as go

from fabric.figures import CableMark, FabricFigureFacts, HostMark, SwitchMark
from fabric.figures_servers import (
    MAX_SERVERS,
    MAX_SWITCHES,
    ServersOnFabric,
    name_range,
    servers_fabric_figure,
)

HOSTILE = "<img src=x onerror=alert(1)>"


def rail_fabric(hosts: dict[str, int], per_leaf: int = 2, rails: int = 8, spines: int = 2):
    """`rails` leaves per unit of `per_leaf` servers, NIC k on leaf k of its unit, every leaf
    cabled to every spine."""
    switches, cables, marks = [], [], []
    names = list(hosts)
    key = {name: f"h{n}" for n, name in enumerate(names)}  # as the selector keys: by id
    units = (len(names) + per_leaf - 1) // per_leaf
    for s in range(1, spines + 1):
        switches.append(SwitchMark(f"sp{s}", f"ib-spine-{s}", 2))
    for u in range(units):
        for r in range(1, rails + 1):
            leaf = f"l{u}r{r}"
            switches.append(SwitchMark(leaf, f"ib-leaf-u{u}-r{r}", 1, rail=r, group=u + 1))
            for s in range(1, spines + 1):
                cables.append(CableMark(leaf, f"sp{s}", "4xNDR", 400.0))
            for name in names[u * per_leaf : (u + 1) * per_leaf]:
                cables.append(CableMark(leaf, key[name], "4xNDR", 400.0, rail=r))
    for name in names:
        marks.append(HostMark(key[name], name, "rack-1"))
    facts = FabricFigureFacts("demo-ib", switches, marks, cables)
    return ServersOnFabric(facts, {key[name]: gpus for name, gpus in hosts.items()})


def draw(on: ServersOnFabric) -> dict:
    """The figure, as Plotly's own schema accepts it."""
    figure = servers_fabric_figure(on)
    go.Figure(figure)
    return figure


def _by_name(figure: dict) -> dict[str, dict]:
    return {trace["name"]: trace for trace in figure["data"]}


def test_two_servers_under_one_leaf_meet_on_their_rail_leaves_not_the_spines():
    figure = draw(rail_fabric({"dgx-h100-01": 8, "dgx-h100-02": 8}))
    title = figure["layout"]["title"]["text"]
    assert "2 servers under one leaf: ib-leaf-u0-r1…r8 (8 rails), 1 switch between them" in title
    traces = _by_name(figure)
    lit = traces["switches on its paths"]
    assert {t for t in lit["texttemplate"]} == {f"ib-leaf-u0-r{r}" for r in range(1, 9)}
    assert lit["marker"]["line"]["width"] > 0
    faint = traces["other switches"]
    assert faint["texttemplate"] == ["ib-spine-1", "ib-spine-2"] and faint["opacity"] < 1
    assert traces["the workload's servers"]["texttemplate"] == [
        "dgx-h100-01: 8 GPUs",
        "dgx-h100-02: 8 GPUs",
    ]
    assert figure["layout"]["meta"]["hops"] == 1


def test_servers_under_different_leaves_cross_the_spines_above_both():
    on = rail_fabric({"a-01": 8, "a-02": 8, "b-01": 4}, per_leaf=2, rails=2, spines=2)
    figure = draw(on)
    title = figure["layout"]["title"]["text"]
    assert "3 servers under 4 leaves, across spines ib-spine-1…2, 3 switches between them" in title
    lit = _by_name(figure)["switches on its paths"]["texttemplate"]
    assert set(lit) == {"ib-spine-1", "ib-spine-2"} | {
        f"ib-leaf-u{u}-r{r}" for u in (0, 1) for r in (1, 2)
    }
    assert "other switches" not in _by_name(figure)
    assert "b-01: 4 GPUs" in _by_name(figure)["the workload's servers"]["texttemplate"]
    assert figure["layout"]["meta"]["hops"] == 3


def test_the_spines_cables_off_the_paths_are_faint():
    figure = draw(rail_fabric({"dgx-1": 8, "dgx-2": 8}, rails=2))
    lines = [t for t in figure["data"] if t.get("mode") == "lines"]
    assert any(t.get("opacity", 1) < 1 for t in lines)  # leaf to spine: no path of theirs
    assert any(t.get("opacity", 1) == 1 for t in lines)  # server to leaf


def test_a_hostile_hostname_is_text_never_markup():
    figure = draw(rail_fabric({HOSTILE: 8, "dgx-2": 8}, rails=2))
    blob = json.dumps(figure)
    assert "<img" not in blob
    labels = _by_name(figure)["the workload's servers"]["texttemplate"]
    assert "&lt;img src=x onerror=alert(1)&gt;: 8 GPUs" in labels


def test_a_hostile_switch_name_is_escaped_in_the_title():
    on = rail_fabric({"dgx-1": 8, "dgx-2": 8}, rails=1)
    facts = on.facts
    switches = [
        SwitchMark(s.key, HOSTILE, s.tier, s.rail) if s.tier == 1 else s for s in facts.switches
    ]
    figure = draw(
        ServersOnFabric(FabricFigureFacts(facts.name, switches, facts.hosts, facts.cables), on.gpus)
    )
    assert "<img" not in json.dumps(figure)
    assert "under one leaf: &lt;img" in figure["layout"]["title"]["text"]


def test_a_large_workload_is_drawn_bounded_and_says_so():
    on = rail_fabric({f"gpu{n:03d}": 8 for n in range(64)}, per_leaf=4, rails=8, spines=8)
    figure = draw(on)
    traces = _by_name(figure)
    assert len(traces["the workload's servers"]["x"]) == MAX_SERVERS
    drawn = sum(
        len(traces[n]["x"]) for n in ("switches on its paths", "other switches") if n in traces
    )
    assert drawn <= MAX_SWITCHES
    lit = traces["switches on its paths"]["texttemplate"]
    assert {f"ib-spine-{n}" for n in range(1, 9)} <= set(lit)  # the spines that join them stay
    title = figure["layout"]["title"]["text"]
    assert f"drawn: the first {MAX_SERVERS} of 64 servers" in title
    assert "64 servers under 128 leaves" in title
    assert figure["layout"]["meta"]["cut"] is True


def test_no_server_on_a_cable_says_no_fabric_is_known():
    figure = draw(ServersOnFabric(FabricFigureFacts("ib", []), {}))
    assert figure["layout"]["meta"]["empty"]
    assert "No fabric known for these servers" in figure["layout"]["annotations"][0]["text"]


def test_a_down_cable_leaves_its_server_without_a_path_and_stays_marked():
    on = rail_fabric({"dgx-1": 8, "dgx-2": 8}, rails=1)
    facts = on.facts
    cables = [
        CableMark(c.a, c.b, c.speed, c.gbps, "down", c.rail) if c.b == "h1" else c
        for c in facts.cables
    ]
    figure = draw(
        ServersOnFabric(FabricFigureFacts(facts.name, facts.switches, facts.hosts, cables), on.gpus)
    )
    assert figure["layout"]["meta"]["hops"] is None
    assert "through switches not drawn" in figure["layout"]["title"]["text"]
    assert any(t.get("line", {}).get("dash") == "dot" for t in figure["data"])


def test_names_in_a_run_are_written_as_a_range():
    assert name_range([f"ib-leaf-r{r}" for r in range(1, 9)]) == "ib-leaf-r1…r8"
    assert name_range(["ib-spine-1", "ib-spine-2"]) == "ib-spine-1…2"
    assert name_range(["spine-p001-01", "spine-p001-02"]) == "spine-p001-01…02"
    assert name_range(["leaf-10", "leaf-12"]) == "leaf-10, leaf-12"
    assert name_range(["a", "b", "c", "d"]) == "a, b, c and 1 more"
    assert name_range(["x"]) == "x"
