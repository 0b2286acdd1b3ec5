"""Chassis heights: how many rack units a server takes, from its DMI product name.

Pure: the rack figure (`topology.figures.racks`) draws each server this high, and the
reconciliation rule on overlapping rack units (`clusters.rules.location`) counts the units
each one takes; one table for both, so what the figure shows and what a finding says agree.
"""

from __future__ import annotations

import re

CHASSIS_HEIGHT_U: tuple[tuple[str, int], ...] = (
    ("dgxh100", 8),
    ("dgxh200", 8),
    ("dgxb200", 10),
    ("dgxb300", 10),
    ("dgxa100", 6),
    ("dgx-2", 10),
    ("dgx2", 10),
    ("dgx-1", 3),
    ("dgx1", 3),
    ("xe9680", 6),
    ("xe9640", 4),
    ("xe8545", 4),
    ("r760xa", 2),
    ("r750xa", 2),
)
"""Known chassis heights by a fragment of the DMI product name (spaces removed, lower case)."""

DEFAULT_HEIGHT_U = 2


def chassis_height_u(model: str) -> tuple[int, bool]:
    """(height in rack units, whether it is known) from the server's DMI product name.

    Known DGX and PowerEdge XE/R models from the table; Dell's R6xx are 1U, R7xx 2U;
    Supermicro's model numbers start with the height (`SYS-821GE` 8U, `AS -4125GS` 4U).
    Anything else is DEFAULT_HEIGHT_U high, and says it is not known.
    """
    key = (model or "").lower().replace(" ", "")
    for fragment, units in CHASSIS_HEIGHT_U:
        if fragment in key:
            return units, True
    dell = re.search(r"poweredger([67])\d\d", key)
    if dell:
        return (1 if dell.group(1) == "6" else 2), True
    supermicro = re.match(r"(?:sys|as)-?([1-8])\d{2,3}", key)
    if supermicro:
        return int(supermicro.group(1)), True
    return DEFAULT_HEIGHT_U, False
