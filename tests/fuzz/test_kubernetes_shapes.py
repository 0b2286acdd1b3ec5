"""Hypothesis: a value of a wrong type at any depth of a pods list or a NodeList.

Starts from valid documents (the pods fixture, a NodeList from tests/nodes.py and the GPU
fleet fixture), replaces one value, at any depth, by a value of another JSON type, and
parses. The parser answers records or a SnapshotFormatError (a field-level 400), never
another exception (a 500). Pure parsers, no database: fast enough for the normal tier.
"""

from __future__ import annotations

import contextlib
import copy
import math
from typing import Any

from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from clusters.parsers import SnapshotFormatError, parse_pods
from clusters.parsers.kubernetes import parse_kubernetes
from clusters.parsers.shape import type_words
from tests.fixtures.scheduler import fixture_json
from tests.nodes import k8s_node

from .conftest import examples

SETTINGS = hypothesis_settings(
    max_examples=examples(200),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

PODS = fixture_json("k8s-kubectl-get-pods-gpu.json")
NODE_LISTS = [
    {
        "kind": "NodeList",
        "items": [k8s_node("a"), k8s_node("b", unschedulable=True, extra_resources={"x/y": 2})],
    },
    fixture_json("k8s-kubectl-get-nodes-gpu-fleet.json"),
]

# One or more values of every JSON type (and what YAML adds: non-finite floats).
WRONG = [
    {},
    {"a": 1},
    {"nvidia.com/gpu": {"x": []}},
    [],
    [1],
    ["x"],
    [{}],
    [[]],
    "",
    "x",
    "8",
    0,
    7,
    -1,
    1.5,
    math.inf,
    math.nan,
    True,
    False,
]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path below ``value`` (object keys and list indexes), at every depth."""
    found: list[tuple[Any, ...]] = []
    children = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in children:
        found.append((*prefix, key))
        if isinstance(item, dict | list):
            found.extend(paths(item, (*prefix, key)))
    return found


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    broken = copy.deepcopy(document)
    parent = broken
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return broken


def _mutations(document: Any) -> st.SearchStrategy[Any]:
    def at(path: tuple[Any, ...]) -> st.SearchStrategy[Any]:
        original = document
        for key in path:
            original = original[key]
        others = [v for v in WRONG if type_words(v) != type_words(original)]
        return st.sampled_from(others).map(lambda value: replaced(document, path, value))

    return st.sampled_from(paths(document)).flatmap(at)


def _parses_or_refuses(parse: Any, document: Any) -> None:
    with contextlib.suppress(SnapshotFormatError):
        parse(document)


@SETTINGS
@given(document=_mutations(PODS))
def test_a_wrong_type_anywhere_in_a_pods_list_is_records_or_a_format_error(document):
    _parses_or_refuses(parse_pods, document)


@SETTINGS
@given(document=st.sampled_from(NODE_LISTS).flatmap(_mutations))
def test_a_wrong_type_anywhere_in_a_node_list_is_records_or_a_format_error(document):
    _parses_or_refuses(parse_kubernetes, document)


def test_the_paths_reach_every_depth():
    found = paths(PODS)
    assert ("items", 0, "spec", "containers", 0, "resources", "requests", "nvidia.com/gpu") in found
    assert ("items", 3, "spec", "initContainers", 0, "resources", "limits") in found
