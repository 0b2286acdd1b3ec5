"""The rack view never draws one chassis over another: chassis whose U ranges overlap in a
rack (an 8U DGX set 4U above another) stand side by side, outlined, each with its name and
a hover that says what it overlaps; chassis that fit stay full width."""

from __future__ import annotations

from core.palette import WARNING, tone_colour
from topology.figures import rack_figure

from .test_figures import fleet_rows, trace, validate


def _rack(positions: list[tuple[str, int]]) -> dict:
    rows = fleet_rows(len(positions), servers_per_rack=len(positions), vm_hosts=0)
    for server, (model, position) in zip(rows["servers"], positions, strict=True):
        server.update(model=model, rack="r1", rack_position=position, hostname=f"<b>{position}")
    return trace(validate(rack_figure(rows)), "bar")


def test_overlapping_8u_chassis_stand_side_by_side_with_their_names():
    bar = _rack([("DGXH100", 10), ("DGXH100", 14), ("DGXH100", 18), ("DGXH100", 26)])
    widths, offsets = bar["width"], bar["offset"]
    assert len({round(w, 3) for w in widths}) == 1 and widths[0] < 0.7
    # U10-17 and U18-25 share a lane, U14-21 the other; U26 fits above U18-25's lane
    lanes = [round((o + 0.35) / widths[0]) for o in offsets]
    assert lanes == [0, 1, 0, 0]
    assert bar["text"] == ["&lt;b&gt;10", "&lt;b&gt;14", "&lt;b&gt;18", "&lt;b&gt;26"]
    assert "overlaps &lt;b&gt;14" in bar["hovertext"][0]
    assert "overlaps &lt;b&gt;10, &lt;b&gt;18" in bar["hovertext"][1]
    assert "overlaps" not in bar["hovertext"][3]
    lines = bar["marker"]["line"]["color"]
    assert lines[:3] == [tone_colour(WARNING)] * 3 and lines[3] != tone_colour(WARNING)


def test_chassis_that_fit_stay_full_width_and_no_overlap_legend():
    rows = fleet_rows(3, servers_per_rack=3, vm_hosts=0)
    for server, position in zip(rows["servers"], (1, 9, 17), strict=True):
        server.update(model="DGXH100", rack="r1", rack_position=position)
    figure = validate(rack_figure(rows))
    bar = trace(figure, "bar")
    assert bar["width"] == [0.7] * 3 and bar["offset"] == [-0.35] * 3
    assert not any("overlaps" in t for t in bar["hovertext"])
    assert "overlaps another chassis" not in str([t.get("name") for t in figure["data"]])
