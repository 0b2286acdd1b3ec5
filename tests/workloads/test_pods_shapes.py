"""Issue 24: a value of a wrong type anywhere in a pod list is a SnapshotFormatError naming
its path, or records that group into workloads: never another exception (a 500)."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.parsers import SnapshotFormatError, parse_pods
from tests.fixtures.scheduler import fixture_json
from workloads.parsers.pods import pods_to_workloads

PODS = fixture_json("k8s-kubectl-get-pods-workloads.json")
WRONG: list[Any] = [
    {},
    {"a": 1},
    [],
    ["x"],
    [{}],
    "",
    "x",
    "2026-13-45T99:00:00Z",
    0,
    7,
    -1,
    1.5,
    True,
]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []
    children = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in children:
        found.append((*prefix, key))
        if isinstance(item, dict | list):
            found.extend(paths(item, (*prefix, key)))
    return found


def replaced(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    broken = copy.deepcopy(PODS)
    parent = broken
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return broken


@settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(path=st.sampled_from(paths(PODS)), value=st.sampled_from(WRONG))
def test_a_wrong_value_anywhere_is_a_format_error_or_workloads(path, value):
    with contextlib.suppress(SnapshotFormatError):
        pods_to_workloads(parse_pods(replaced(path, value)))


def test_the_paths_reach_the_fields_grouping_reads():
    found = paths(PODS)
    assert ("items", 0, "metadata", "ownerReferences", 0, "controller") in found
    assert ("items", 0, "status", "containerStatuses", 0, "state", "running", "startedAt") in found
    assert ("items", 0, "metadata", "labels", "training.kubeflow.org/job-name") in found
