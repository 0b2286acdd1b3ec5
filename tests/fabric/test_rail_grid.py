"""A rail-optimised fabric drawn as what it is: the switch tree above a grid of servers x
rails whose cells name the leaf and port and are coloured by the cable's state and speed (a
wrong rail, a slow or a down cable is one odd cell); the eight rail colours stay apart; names
escaped; legends that fit. Pure, on hand-built facts, and once through the page."""

from __future__ import annotations

import json
import re

import pytest

from core.figures import MAX_MARKS
from core.palette import PALETTE
from fabric.figures import (
    CELL_DOWN,
    CELL_NONE,
    CELL_OK,
    CELL_SLOW,
    CELL_WRONG,
    DEGRADED_COLOUR,
    DOWN,
    DOWN_COLOUR,
    RAIL_COLOURS,
    CableMark,
    FabricFigureFacts,
    HostMark,
    SwitchMark,
    fabric_figure,
    rail_colour,
    rail_grid,
)

EVIL = '<img src=x onerror="alert(1)">'


def _rails(
    servers: int = 4, rails: int = 4, odd: dict | None = None, name=lambda n: f"gpu{n:02d}"
) -> FabricFigureFacts:
    """One unit: `rails` leaves (leaf-r<k>) under 2 spines, server n's NIC k on leaf k port
    n+1, 400 Gb/s; `odd` maps (server, rail) to CableMark overrides (or None: no cable)."""
    odd = odd or {}
    switches = [SwitchMark(f"l{k}", f"leaf-r{k}", 1, k, 1) for k in range(1, rails + 1)]
    switches += [SwitchMark(f"s{k}", f"spine-{k}", 2) for k in (1, 2)]
    hosts = [HostMark(f"h{n}", name(n)) for n in range(servers)]
    cables = [
        CableMark(f"l{k}", f"s{s}", "4xNDR", 400.0) for k in range(1, rails + 1) for s in (1, 2)
    ]
    for n in range(servers):
        for k in range(1, rails + 1):
            if (n, k) in odd and odd[n, k] is None:
                continue
            fields = {
                "a": f"l{k}",
                "b": f"h{n}",
                "speed": "4xNDR",
                "gbps": 400.0,
                "rail": k,
                "nic_rail": k,
                "label": f"mlx5_{k - 1}",
                "port": n + 1,
            }
            fields.update(odd.get((n, k), {}))
            cables.append(CableMark(**fields))
    return FabricFigureFacts("ib", switches, hosts, cables, rail_optimised=True)


def _heatmap(figure: dict) -> dict:
    (found,) = [t for t in figure["data"] if t["type"] == "heatmap"]
    return found


def test_eight_rail_colours_stay_apart_and_none_is_a_state_colour():
    assert len(set(RAIL_COLOURS)) == 8
    assert [rail_colour(k) for k in range(1, 9)] == list(RAIL_COLOURS)
    assert rail_colour(9) == rail_colour(1)
    states = {DOWN_COLOUR, DEGRADED_COLOUR} | {tone["solid"] for tone in PALETTE.values()}
    assert not {c.lower() for c in RAIL_COLOURS} & {c.lower() for c in states}
    okabe_ito = {"#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00"}
    assert okabe_ito | {"#CC79A7"} == set(RAIL_COLOURS)


def test_each_cell_names_leaf_and_port_and_the_odd_ones_stand_out():
    facts = _rails(
        odd={
            (1, 3): {"gbps": 200.0, "speed": "4xHDR"},  # slow
            (2, 2): {"a": "l3", "rail": 3, "nic_rail": 2},  # NIC of rail 2 on rail 3's leaf
            (3, 4): {"state": DOWN},
            (0, 1): None,  # no cable
        }
    )
    grid = rail_grid(facts)
    assert grid is not None and grid.rails == [1, 2, 3, 4]
    assert [h.name for h in grid.hosts] == ["gpu00", "gpu01", "gpu02", "gpu03"]
    codes = [[cell.code for cell in row] for row in grid.cells]
    assert codes == [
        [CELL_NONE, CELL_OK, CELL_OK, CELL_OK],
        [CELL_OK, CELL_OK, CELL_SLOW, CELL_OK],
        [CELL_OK, CELL_WRONG, CELL_OK, CELL_OK],
        [CELL_OK, CELL_OK, CELL_OK, CELL_DOWN],
    ]
    assert grid.cells[1][0].text == "leaf-r1 p2"
    assert grid.cells[1][2].text == "▼ leaf-r3 p2"
    assert grid.cells[2][1].text == "⇄ leaf-r3 p3"
    assert grid.cells[3][3].text == "✕ leaf-r4 p4"
    assert "wrong rail: NIC of rail 2 on a leaf of rail 3" in grid.cells[2][1].hover
    assert "slower than its peers (400 Gb/s)" in grid.cells[1][2].hover
    assert "mlx5_2 to leaf-r3 port 2" in grid.cells[1][2].hover
    assert "no cable on this rail" in grid.cells[0][0].hover


def test_the_rail_figure_is_a_tree_above_the_grid_with_every_colour_explained():
    facts = _rails(servers=6, odd={(1, 3): {"gbps": 200.0}, (2, 2): {"a": "l3", "nic_rail": 2}})
    figure = fabric_figure(facts)
    layout = figure["layout"]
    assert layout["meta"]["rail_grid"] is True and layout["meta"]["level"] == "detail"
    assert "rail-optimised, 4 rails" in layout["title"]["text"]
    heat = _heatmap(figure)
    assert heat["x"] == ["rail 1", "rail 2", "rail 3", "rail 4"]
    assert layout["yaxis2"]["ticktext"] == [f"gpu{n:02d}" for n in range(6)]
    assert heat["showscale"] is False and heat["texttemplate"] == "%{text}"
    legend = [t["name"] for t in figure["data"] if t.get("showlegend")]
    assert [f"leaf of rail {k}" for k in range(1, 5)] == legend[:4]
    assert any("wrong rail" in n for n in legend) and any("slower" in n for n in legend)
    assert not any("down" in n for n in legend)  # only the colours drawn are explained
    # every code drawn has its own colour, with no blend between codes
    scale = heat["colorscale"]
    assert len({colour for _, colour in scale}) == 5 and heat["zmax"] == 5
    # the tree names its switches; the leaves are coloured by rail
    leaves = [t for t in figure["data"] if t.get("name", "").startswith("leaves of rail")]
    assert [t["marker"]["color"] for t in leaves] == [rail_colour(k) for k in range(1, 5)]
    assert all(t["texttemplate"] == [f"leaf-r{k}"] for k, t in enumerate(leaves, start=1))
    # room for all of it: the page gives the element this height, and scrolls it sideways
    assert layout["height"] >= 6 * 22 + 160 + 4 * 19
    assert layout["meta"]["min_width"] >= 160 + 120 * 4
    assert layout["yaxis"]["domain"][0] > layout["yaxis2"]["domain"][1]


def test_names_are_escaped_in_the_grid_the_tree_and_the_hovers():
    facts = _rails(servers=2, rails=2, name=lambda n: f"{EVIL}{n}")
    evil_leaf = [SwitchMark(s.key, EVIL, s.tier, s.rail, s.group) for s in facts.switches]
    facts = FabricFigureFacts(
        EVIL, evil_leaf, facts.hosts, facts.cables, rail_optimised=True, rail_names={1: EVIL}
    )
    text = json.dumps(fabric_figure(facts))
    assert "<img" not in text
    assert "&lt;img" in text


def test_a_fabric_not_rail_optimised_or_of_one_rail_keeps_the_cable_drawing():
    plain = _rails()
    plain = FabricFigureFacts(plain.name, plain.switches, plain.hosts, plain.cables)
    assert not [t for t in fabric_figure(plain)["data"] if t["type"] == "heatmap"]
    one = _rails(rails=1)
    assert rail_grid(one) is None
    assert "rail_grid" not in fabric_figure(one)["layout"]["meta"]


def test_more_cells_than_the_mark_limit_keep_the_cable_drawing():
    assert rail_grid(_rails(servers=MAX_MARKS // 4 + 1, rails=4)) is None


def test_the_detail_figure_names_few_servers_and_its_legend_has_room():
    small = fabric_figure(FabricFigureFacts(**{**_rails().__dict__, "rail_optimised": False}))
    servers = next(t for t in small["data"] if t.get("name") == "servers")
    assert servers["mode"] == "markers+text" and servers["texttemplate"][0] == "gpu00"
    legend = [t for t in small["data"] if t.get("showlegend")]
    layout = small["layout"]
    assert layout["legend"]["orientation"] == "h"
    assert layout["margin"]["b"] >= 26 * ((len(legend) + 2) // 3)
    many = _rails(servers=30, rails=2)
    many = FabricFigureFacts(many.name, many.switches, many.hosts, many.cables)
    servers = next(t for t in fabric_figure(many)["data"] if t.get("name") == "servers")
    assert servers["mode"] == "markers"


@pytest.mark.django_db
def test_the_page_draws_a_rail_optimised_fabric_as_the_grid(client, user):
    from fabric.services import fabric_snapshot_ingest
    from fabric.synthetic import synthetic_fabric

    built = synthetic_fabric(
        servers=8, rails=8, servers_per_leaf=4, slow={("gpu00002", 3): "4xHDR"}
    )
    fabric_snapshot_ingest(fabric_name="ib", raw=built.text)
    client.force_login(user)
    text = client.get("/fabric/").content.decode()
    figure = json.loads(re.search(r'id="figure-ib-data"[^>]*>(.*?)</script>', text, re.S)[1])
    heat = _heatmap(figure)
    assert heat["x"][0] == "rail 1 (mlx5_0)" and len(heat["x"]) == 8
    cells = {cell for row in heat["text"] for cell in row}
    assert "leaf-su0001-r1 p1" in cells
    assert "▼ leaf-su0001-r3 p2" in cells  # the HDR cable, slower than its NDR peers
