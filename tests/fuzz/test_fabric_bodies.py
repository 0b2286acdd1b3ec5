"""Hypothesis fuzzer for the fabric's own text bodies: ibnetdiscover snapshots (plain and
`-p`) and node-name maps.

Each example starts from a valid output and breaks one thing in it (a number beyond any
column, a NUL, a byte that is not UTF-8, a GUID too long, a name longer than any column, a
line cut, lost or printed twice). The answer is never a 5xx, and a refused snapshot leaves
the fabric as it was.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from fabric.models import Fabric, FabricLink
from fabric.services import fabric_snapshot_ingest
from tests.fabric.conftest import fixture_text

from .conftest import TALLY, examples

pytestmark = [pytest.mark.django_db, pytest.mark.fuzz]

FUZZ = hypothesis_settings(
    max_examples=examples(100),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
BASES = [
    fixture_text("ibnetdiscover-router-dualport.out"),
    fixture_text("ibnetdiscover-p-split.out"),
]
NUMBER = re.compile(r"\d+")
BAD_NUMBERS = ["255", "256", "32767", "32768", "65536", str(2**31), str(2**63), str(10**40)]
BAD_TEXT = ["\x00", "\ud800", "\x1b[31m", "<script>", "x" * 300, "y" * 5000, "\u202e", '"']


@st.composite
def snapshot_bodies(draw) -> bytes:
    lines = draw(st.sampled_from(BASES)).split("\n")
    at = draw(st.integers(0, len(lines) - 1))
    line = lines[at]
    how = draw(st.sampled_from(["number", "text", "guid", "cut", "drop", "twice"]))
    if how == "number" and NUMBER.search(line):
        spans = [m.span() for m in NUMBER.finditer(line)]
        start, end = draw(st.sampled_from(spans))
        line = line[:start] + draw(st.sampled_from(BAD_NUMBERS)) + line[end:]
    elif how == "text":
        where = draw(st.integers(0, len(line)))
        line = line[:where] + draw(st.sampled_from(BAD_TEXT)) + line[where:]
    elif how == "guid":
        line = re.sub(r"0x[0-9a-f]{4,16}", "0x1" + "f" * 16, line, count=1)
    elif how == "cut":
        line = line[: draw(st.integers(0, len(line)))]
        lines = lines[: at + 1]
    elif how == "drop":
        line = ""
    else:
        line = line + "\n" + line
    lines[at] = line
    return "\n".join(lines).encode("utf-8", "surrogatepass")


@given(body=snapshot_bodies())
@FUZZ
def test_fabric_snapshot_bodies_never_get_a_5xx_and_a_refusal_keeps_the_fabric(staff, body):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(staff)
    if not Fabric.objects.filter(name="fz").exists():
        fabric_snapshot_ingest(fabric_name="fz", raw=BASES[0])
    before = set(FabricLink.objects.filter(fabric__name="fz").values_list("id", "gone_at"))

    response = api.generic("POST", "/api/v1/fabrics/fz/snapshots/", body, "text/plain")

    TALLY["fabric snapshot bodies"] += 1
    assert response.status_code in (200, 201, 400), (response.status_code, body[:300])
    if response.status_code == 400:
        assert response.json()["errors"]["body"]
        after = set(FabricLink.objects.filter(fabric__name="fz").values_list("id", "gone_at"))
        assert after == before
    else:
        TALLY["fabric snapshot bodies accepted"] += 1
        fabric_snapshot_ingest(fabric_name="fz", raw=BASES[0])  # the next starts from it


@given(
    guid=st.sampled_from(["0x0002c9030000a001", "0x1" + "f" * 16, "0x", "0xzz", "2c9030000a001"]),
    name=st.one_of(st.sampled_from(BAD_TEXT), st.text(max_size=40)),
)
@FUZZ
def test_node_name_map_bodies_never_get_a_5xx(staff, guid, name):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(staff)
    if not Fabric.objects.filter(name="fz").exists():
        fabric_snapshot_ingest(fabric_name="fz", raw=BASES[0])
    body = f'{guid} "{name}"\n'.encode("utf-8", "surrogatepass")

    response = api.generic("PUT", "/api/v1/fabrics/fz/node-name-map/", body, "text/plain")

    TALLY["fabric node-name maps"] += 1
    assert response.status_code in (200, 400), (response.status_code, body[:300])
