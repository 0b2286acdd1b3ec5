"""A workload in words, and which allocations are shown: pure, no database."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from workloads.describe import by_node, locality_text, shape_text, shown_allocations


@dataclass
class A:
    node_name: str
    index: int | None
    until: Any = None
    node_id: int | None = None
    server_id: int | None = None
    gpu_id: int | None = None
    mig_device_id: int | None = None
    uuid: str = ""


T1 = datetime(2026, 11, 30, 8, tzinfo=UTC)
T2 = datetime(2026, 11, 30, 9, tzinfo=UTC)


@pytest.mark.parametrize(
    ("nodes", "gpus", "per_node", "text"),
    [
        (2, 16, 8, "2 nodes × 8 GPUs = 16"),
        (1, 4, None, "1 node × 4 GPUs = 4"),
        (1, 1, 1, "1 node × 1 GPU = 1"),
        (3, 10, None, "3 nodes, 10 GPUs"),
        (3, 10, 4, "3 nodes, 10 GPUs"),
        (0, 8, None, "8 GPUs"),
        (0, 0, None, "—"),
    ],
)
def test_a_shape_is_written_as_people_say_it(nodes, gpus, per_node, text):
    assert shape_text(nodes, gpus, per_node) == text


def test_a_running_workload_shows_what_it_holds_now():
    rows = [A("n1", 6, until=T1), A("n2", 0), A("n2", 1)]
    assert [(a.node_name, a.index) for a in shown_allocations(rows)] == [("n2", 0), ("n2", 1)]


def test_an_ended_workload_shows_the_set_it_held_last():
    rows = [A("n1", 6, until=T1), A("n2", 0, until=T2), A("n2", 1, until=T2)]
    assert [a.index for a in shown_allocations(rows)] == [0, 1]
    assert shown_allocations([]) == []


def test_allocations_group_by_node_in_order():
    nodes = by_node([A("n1", 0, node_id=1), A("n1", 1, node_id=1), A("n2", 0)])
    assert [(n.node, n.node_id, [a.index for a in n.gpus]) for n in nodes] == [
        ("n1", 1, [0, 1]),
        ("n2", None, [0]),
    ]


@pytest.mark.parametrize(
    ("locality", "nodes", "text"),
    [
        (
            {"within_node": "NV18", "switch_hops": 1},
            2,
            "NVLink within each node, 1 switch between nodes (one leaf)",
        ),
        ({"within_node": "SYS", "switch_hops": 0}, 1, "across sockets within the node"),
        ({"within_node": None, "switch_hops": 3}, 2, "3 switches between nodes (through a spine)"),
        (
            {"within_node": "PIX", "switch_hops": None},
            2,
            "one PCIe switch within each node, no fabric known between its nodes",
        ),
        ({}, 1, ""),
    ],
)
def test_locality_in_words(locality, nodes, text):
    assert locality_text(locality, nodes) == text
