"""`selectors.gpu_actions` from the rule's SQL compiled once (`_ACTIONS_SQL`): the same GPUs,
words, states and indexes as the health page's rows (`health.selectors.gpus_needing_action`),
on the first call and on the ones after, which build no query; one query for the GPUs and one
for the findings they name, whatever the fleet."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from findings.choices import FindingType, Severity
from findings.models import Finding
from health.selectors import gpus_needing_action
from inventory.models import Gpu
from placement import selectors
from placement.selectors import gpu_actions
from tests.reports import apply_reports, make_report

from .fleets import with_queries

pytestmark = pytest.mark.django_db


def _finding(n: int, type_: str, severity: str, **kw) -> None:
    Finding.objects.create(
        type=type_,
        severity=severity,
        subject=f"{type_}:{n}",
        message=f"finding {n}",
        first_seen=timezone.now(),
        **kw,
    )


def _fleet(servers: int) -> None:
    """Every reason once (lost, lost off the bus, NVML error, a health finding, a server's
    critical finding), on the first of `servers` servers of 4 GPUs; the rest healthy."""
    apply_reports(*(make_report(f"dgx-{n}", gpus=4) for n in range(servers)))
    gpus = {(g.server.hostname, g.index): g for g in Gpu.objects.select_related("server")}
    Gpu.objects.filter(pk=gpus[("dgx-0", 0)].pk).update(status="lost")
    Gpu.objects.filter(pk=gpus[("dgx-0", 1)].pk).update(status="lost", uuid_synthetic=True)
    Gpu.objects.filter(pk=gpus[("dgx-0", 2)].pk).update(status="error")
    fatal = gpus[("dgx-0", 3)]
    _finding(1, FindingType.GPU_FATAL_XID, Severity.CRITICAL, gpu=fatal, server=fatal.server)
    _finding(2, FindingType.BELOW_PROFILE, Severity.CRITICAL, server=gpus[("dgx-1", 0)].server)


def _expected() -> dict[int, tuple[int, str, int]]:
    return {r.gpu_id: (r.server_id, r.words, r.index) for r in gpus_needing_action()}


def _read() -> tuple[dict, int]:
    return with_queries(gpu_actions)


@pytest.mark.parametrize("servers", [2, 6])
def test_the_health_pages_gpus_in_two_queries_whatever_the_fleet(servers):
    _fleet(servers)
    found, queries = _read()
    assert queries == 2
    assert {pk: (s, words, index) for pk, (s, words, _state, index) in found.items()} == (
        _expected()
    )
    assert len(found) == 8  # dgx-0's four, dgx-1's four (its server's critical finding)
    states = {Gpu.objects.get(pk=pk).status: state for pk, (_s, _w, state, _i) in found.items()}
    assert states["ok"] == 0 and states["error"] >> 1 != states["lost"] >> 1


def test_the_sql_is_compiled_once_and_answers_the_data_of_each_call(monkeypatch):
    _fleet(2)
    gpu_actions()
    assert connection.vendor in selectors._ACTIONS_SQL

    def built_again(*args, **kwargs):
        raise AssertionError("the query is built again")

    monkeypatch.setattr(selectors, "gpus_needing_action_qs", built_again)
    before, _ = _read()
    Gpu.objects.filter(status="error").update(status="ok")
    after, queries = _read()
    assert queries == 2
    assert len(after) == len(before) - 1 and after == {
        pk: found for pk, found in before.items() if pk in after
    }
