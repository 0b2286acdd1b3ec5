"""The fabric figure, pure: escaped names, rails coloured, down and degraded cables marked,
and folded to switch level, then to tier-by-rail groups, above MAX_MARKS."""

from __future__ import annotations

import json

from core.figures import MAX_MARKS
from fabric.figures import (
    DEGRADED,
    DEGRADED_COLOUR,
    DOWN,
    DOWN_COLOUR,
    CableMark,
    FabricFigureFacts,
    HostMark,
    SwitchMark,
    TrunkBundle,
    fabric_figure,
    rail_colour,
    trunk_bundles,
)


def _facts(
    servers: int, rails: int = 2, per_leaf: int = 4, leaves_per_spine: int = 0
) -> FabricFigureFacts:
    switches, hosts, cables = [], [], []
    units = -(-servers // per_leaf)
    spines = [SwitchMark(f"sp{i}", f"spine-{i}", 2) for i in range(2)]
    switches += spines
    for unit in range(units):
        for rail in range(1, rails + 1):
            leaf = SwitchMark(f"l{unit}-{rail}", f"leaf-{unit}-{rail}", 1, rail, unit)
            switches.append(leaf)
            cables += [CableMark(leaf.key, s.key, "4xNDR", 400.0) for s in spines]
    for n in range(servers):
        host = HostMark(f"h{n}", f"gpu{n:05d}", rack=f"rack-{n // 8}")
        hosts.append(host)
        for rail in range(1, rails + 1):
            cables.append(
                CableMark(f"l{n // per_leaf}-{rail}", host.key, "4xNDR", 400.0, rail=rail)
            )
    return FabricFigureFacts("ib", switches, hosts, cables)


def _marks(figure) -> int:
    total = 0
    for trace in figure["data"]:
        if trace.get("mode", "").startswith("markers") and trace.get("x") != [None]:
            total += len(trace["x"])
    return total


def test_a_small_fabric_is_drawn_in_detail_with_rails_coloured():
    figure = fabric_figure(_facts(8))
    meta = figure["layout"]["meta"]
    assert meta == {
        "empty": False,
        "aggregated": False,
        "level": "detail",
        "min_width": 70 + 56 * 8,  # room for the eight servers' names
    }
    colours = {t["line"]["color"] for t in figure["data"] if t.get("mode") == "lines"}
    assert {rail_colour(1), rail_colour(2)} <= colours
    legend = {t["name"] for t in figure["data"] if t.get("showlegend")}
    assert {"rail 1", "rail 2", "switch-to-switch"} <= legend
    servers = next(t for t in figure["data"] if t["name"] == "servers")
    assert len(servers["x"]) == 8 and set(servers["y"]) == {0.0}
    hover = next(t for t in figure["data"] if t["name"] == "cable details")
    assert any("400 Gb/s" in text and "rail 2" in text for text in hover["text"])


def test_down_and_degraded_cables_are_marked_in_their_colours():
    facts = _facts(4)
    cables = [
        *facts.cables,
        CableMark("l0-1", "h0", "4xHDR", 200.0, state=DEGRADED, rail=1),
        CableMark("l0-2", "", "4x???", None, state=DOWN),
    ]
    figure = fabric_figure(FabricFigureFacts("ib", facts.switches, facts.hosts, cables))
    lines = {
        (t["line"]["color"], t["line"]["dash"]) for t in figure["data"] if t.get("mode") == "lines"
    }
    assert (DEGRADED_COLOUR, "dash") in lines and (DOWN_COLOUR, "dot") in lines
    hover = " ".join(next(t for t in figure["data"] if t["name"] == "cable details")["text"])
    assert "(degraded)" in hover and "nothing up (down)" in hover and "rate unknown" in hover


def test_names_are_escaped_everywhere():
    evil = '<img src=x onerror="alert(1)">'
    facts = FabricFigureFacts(
        evil,
        [SwitchMark("s1", evil, 1, 1)],
        [HostMark("h1", evil, rack=evil)],
        [CableMark("s1", "h1", "4xNDR", 400.0, rail=1, label=evil)],
    )
    text = json.dumps(fabric_figure(facts))
    assert "<img" not in text and "&lt;img" in text


def test_above_the_mark_limit_the_servers_fold_into_their_leaves():
    facts = _facts(600, rails=2)  # 600 servers, 1,200 server cables: over 2,000 marks
    figure = fabric_figure(facts)
    meta = figure["layout"]["meta"]
    assert meta["aggregated"] and meta["level"] == "switches"
    assert "servers folded into their leaves" in figure["layout"]["title"]["text"]
    assert _marks(figure) <= MAX_MARKS
    switches = next(t for t in figure["data"] if t["name"] == "switches")
    assert len(switches["x"]) == len(facts.switches)
    # each leaf carries the 4 servers of its unit on its rail, one 400 Gb/s cable each
    assert any("4 servers, 4 cables, 1,600 Gb/s down" in t for t in switches["text"])


def test_past_switch_level_too_the_switches_fold_by_tier_and_rail():
    facts = _facts(4400, rails=2)  # 2,200 leaves and 2 spines
    figure = fabric_figure(facts)
    assert figure["layout"]["meta"]["level"] == "groups"
    groups = next(t for t in figure["data"] if t["name"] == "switch groups")
    assert len(groups["x"]) == 3  # leaves of rail 1, of rail 2, and the spines
    assert any("1,100 leaf rail 1 switches" in t and "4,400 servers" in t for t in groups["text"])
    assert _marks(figure) <= MAX_MARKS


def test_no_switch_is_an_empty_figure_that_says_so():
    figure = fabric_figure(FabricFigureFacts("ib", []))
    assert figure["layout"]["meta"]["empty"]


def test_switch_pair_bundles_given_draw_what_the_cables_draw_at_both_folded_levels():
    """A reader may sum the switch-to-switch cables itself (`trunk_bundles` is the rule):
    the figure is the same at switch level and at group level, down and degraded too."""
    for servers, level in ((600, "switches"), (4400, "groups")):
        facts = _facts(servers, rails=2)
        trunks = [c for c in facts.cables if c.b.startswith("sp")]
        trunks[0] = CableMark(trunks[0].a, trunks[0].b, "4xHDR", 200.0, state=DEGRADED)
        trunks[1] = CableMark(trunks[1].a, trunks[1].b, "4x???", None, state=DOWN)
        edge = [c for c in facts.cables if not c.b.startswith("sp")]
        whole = FabricFigureFacts("ib", facts.switches, facts.hosts, trunks + edge)
        bundles = trunk_bundles(trunks)
        assert len(bundles) == len(trunks)  # one cable per leaf and spine here
        assert sum(b.down for b in bundles) == 1 and sum(b.degraded for b in bundles) == 1
        summed = FabricFigureFacts("ib", facts.switches, facts.hosts, edge, bundles=bundles)
        figure = fabric_figure(whole)
        assert figure["layout"]["meta"]["level"] == level
        assert fabric_figure(summed) == figure
        assert "1 degraded" in json.dumps(figure) and "1 gone or down" in json.dumps(figure)


def test_bundles_sum_both_directions_of_a_pair_and_leave_out_a_switch_to_itself():
    cables = [
        CableMark("s2", "s10", "4xNDR", 400.0),
        CableMark("s10", "s2", "4xNDR", 400.0, state=DEGRADED),
        CableMark("s2", "s2", "4xNDR", 400.0),
    ]
    assert trunk_bundles(cables) == [TrunkBundle("s10", "s2", 2, 800.0, 0, 1)]
