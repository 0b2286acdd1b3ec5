"""Chassis heights live in inventory, below the rack figure and the rack-units rule that both
read them. No database."""

from __future__ import annotations

from clusters.rules import location
from inventory.chassis import DEFAULT_HEIGHT_U, chassis_height_u
from topology.figures import racks


def test_the_rack_figure_and_the_overlap_rule_read_the_one_table():
    assert racks.chassis_height_u is chassis_height_u
    assert location.chassis_height_u is chassis_height_u


def test_heights_by_product_name():
    assert chassis_height_u("DGXH100") == (8, True)
    assert chassis_height_u("PowerEdge R650") == (1, True)
    assert chassis_height_u("SYS-421GE-TNRT") == (4, True)
    assert chassis_height_u("Some Box 3000") == (DEFAULT_HEIGHT_U, False)
