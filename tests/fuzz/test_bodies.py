"""Hypothesis fuzzers for the two bodies the backend parses itself: reports and snapshots.

Each starts from a valid body and breaks one thing in it (a wrong type, a number beyond any
column, NaN, a NUL, a lone surrogate, a name too long, nesting deeper than any report), or
sends a body no tool prints. The answer is never a 5xx; a 202 for a report is never followed
by a failure in the worker; a refused snapshot leaves the node set as it was.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from clusters.models import ClusterSnapshot, Node
from inventory.choices import ReportStatus
from inventory.models import Report
from tests.nodes import k8s_node, scontrol_node, scontrol_text
from tests.reports import make_report

from .conftest import TALLY, examples

pytestmark = [pytest.mark.django_db, pytest.mark.fuzz]

FUZZ = hypothesis_settings(
    max_examples=examples(100),
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
_ids = itertools.count()

# Values that broke the backend once: beyond 32- and 64-bit columns, beyond a double, NaN,
# NUL, a lone surrogate, names longer than any column, wrong types.
BAD_VALUES = st.sampled_from(
    [
        2**31,
        2**31 - 1,
        2**63,
        -1,
        10**40,
        1e20,
        1e308,
        float("nan"),
        float("inf"),
        -float("inf"),
        "\x00",
        "gpu\x00name",
        "\ud800",
        "a\udfffb",
        "x" * 254,
        "x" * 5000,
        "",
        None,
        True,
        [],
        {},
        [[[[[]]]]],
        {"nested": {"deeper": [1, 2, 3]}},
    ]
)
ANY_VALUE = st.one_of(
    BAD_VALUES,
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=300),
    st.booleans(),
    st.none(),
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside a JSON document (keys and list indexes)."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _paths(item, (*prefix, i))
    return found


@st.composite
def mutated(draw, base: Any) -> bytes:
    """`base` with one value replaced (or a key added), serialised as JSON (NaN included)."""
    document = copy.deepcopy(base)
    paths = _paths(base)
    if draw(st.booleans()):
        parent = draw(st.sampled_from([p for p in [(), *paths] if _is_dict(base, p)]))
        key = draw(st.sampled_from(["extra", "\x00", "\ud800", "x" * 400]))
        _at(document, parent)[key] = draw(ANY_VALUE)
    else:
        path = draw(st.sampled_from(paths))
        _at(document, path[:-1])[path[-1]] = draw(ANY_VALUE)
    return json.dumps(document).encode("utf-8", "surrogatepass")


def _at(document: Any, path: tuple) -> Any:
    for part in path:
        document = document[part]
    return document


def _is_dict(document: Any, path: tuple) -> bool:
    return isinstance(_at(document, path), dict)


@st.composite
def at_the_edge(draw, base: Any) -> bytes:
    """`base` with one number or text at the edge of what its column holds (often valid)."""
    document = copy.deepcopy(base)
    leaves = [p for p in _paths(base) if type(_at(base, p)) in (int, str) and p[0] != "schema"]
    path = draw(st.sampled_from(leaves))
    if isinstance(_at(base, path), int):
        value = draw(st.sampled_from([0, 1, 63, 2**31 - 1, 2**31, 2**63 - 1, 2**63]))
    else:
        value = draw(st.sampled_from([16, 32, 64, 128, 200, 253, 254])) * "x"
    _at(document, path[:-1])[path[-1]] = value
    return json.dumps(document).encode()


def _deep(depth: int) -> bytes:
    return ('{"schema": ' + "[" * depth + "]" * depth + "}").encode()


RAW_BODIES = st.one_of(
    st.integers(10, 200_000).map(_deep),
    st.binary(max_size=200),
    st.sampled_from([b"NaN", b"[NaN]", b'{"a": Infinity}', b"\xff\xfe{}", b"{" * 5000, b""]),
)


def _report_bodies() -> st.SearchStrategy[bytes]:
    base = make_report("fuzz-01", gpus=2, nics=1, mig_gpus={1: ["3g.40gb", "3g.40gb"]})
    base["host"]["guests"] = [{"uuid": "0f0e0d0c-0000-4000-8000-000000000001", "name": "vm"}]
    base["gpus"][0]["nvlinks"] = [{"link": 0, "active": True}]
    return st.one_of(mutated(base), at_the_edge(base), RAW_BODIES)


@given(body=_report_bodies())
@FUZZ
def test_report_bodies_never_get_a_5xx_nor_a_202_that_fails_later(post_report, body):
    from inventory.models import AgentToken
    from inventory.services import agent_token_create

    AgentToken.objects.update(identity=None)  # as an admin re-binding: the server is free again
    key = agent_token_create(name=f"fuzz-{next(_ids)}")[1]
    response = post_report(body, key)
    TALLY["report bodies"] += 1
    assert response.status_code in (202, 400), (response.status_code, body[:300])
    if response.status_code == 202:
        TALLY["report bodies accepted"] += 1
        report = Report.objects.get(pk=response.json()["id"])
        assert report.status != ReportStatus.FAILED, report.error
    else:
        assert response.json()["errors"], response.content


# Snapshots ------------------------------------------------------------------------------


def _node_list() -> dict[str, Any]:
    nodes = [k8s_node("dgx-01", labels={"nvidia.com/gpu.product": "H100"}), k8s_node("dgx-02")]
    return {"apiVersion": "v1", "kind": "List", "items": nodes, "metadata": {}}


SCONTROL_VALUES = st.one_of(
    st.sampled_from(
        ["gpu:h100:99999999999999999999", "gpu:h100:-1", "gpu:h100:2147483648", "gpu:" * 300]
    ),
    st.integers().map(str),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=300),
)


@st.composite
def scontrol_bodies(draw) -> bytes:
    key = draw(st.sampled_from(["Gres", "CPUTot", "RealMemory", "NodeName", "State", "Reason"]))
    value = draw(SCONTROL_VALUES)
    text = scontrol_text(scontrol_node("gpu-01"), scontrol_node("gpu-02", reason="maintenance"))
    lines = text.splitlines()
    lines.insert(draw(st.integers(0, len(lines))), f"   {key}={value}")
    return "\n".join(lines).encode("utf-8", "surrogatepass")


@st.composite
def yaml_bodies(draw) -> bytes:
    document = json.loads(draw(mutated(_node_list())).decode("utf-8", "surrogatepass"))
    try:
        text = yaml.safe_dump(document, allow_unicode=True)
    except yaml.YAMLError:
        text = "apiVersion: v1\nkind: List\nitems: []\n"
    if draw(st.booleans()):
        text = text.replace("items:", "base: &b {a: 1}\nalias: *b\nitems:", 1)
    return text.encode("utf-8", "surrogatepass")


SNAPSHOT_BODIES = st.one_of(mutated(_node_list()), scontrol_bodies(), yaml_bodies(), RAW_BODIES)


@given(body=SNAPSHOT_BODIES, confirm=st.booleans())
@FUZZ
def test_snapshot_bodies_never_get_a_5xx_and_a_refusal_keeps_the_node_set(
    staff_api, django_capture_on_commit_callbacks, body, confirm
):
    cluster = f"fz-{next(_ids)}"
    suffix = "?confirm=shrink" if confirm else ""
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_api.generic(
            "POST", f"/api/v1/clusters/{cluster}/snapshots/{suffix}", body, "text/plain"
        )
    TALLY["snapshot bodies"] += 1
    assert response.status_code in (201, 202, 400), (response.status_code, body[:300])
    if response.status_code == 400:
        assert response.json()["errors"]
        assert not Node.objects.filter(cluster__name=cluster).exists()
        assert not ClusterSnapshot.objects.filter(cluster_name=cluster).exists()
    else:
        TALLY["snapshot bodies accepted"] += 1


@given(body=SNAPSHOT_BODIES)
@hypothesis_settings(FUZZ, max_examples=examples(40))
def test_large_snapshots_end_applied_held_or_failed_in_the_worker(
    staff_api, django_capture_on_commit_callbacks, settings, body
):
    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 0  # every snapshot takes the worker's path
    cluster = f"fz-{next(_ids)}"
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_api.generic(
            "POST", f"/api/v1/clusters/{cluster}/snapshots/", body, "text/plain"
        )
    TALLY["snapshot bodies (worker)"] += 1
    assert response.status_code in (202, 400), (response.status_code, body[:300])
    if response.status_code == 202:
        status = staff_api.get(response.json()["url"]).json()
        assert status["status"] in ("applied", "failed"), status
        if status["status"] == "failed":
            assert status["errors"] and not Node.objects.filter(cluster__name=cluster).exists()
