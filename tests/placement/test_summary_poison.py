"""A report the schema allows never stops the placement summaries (issue 26, item 2).

A MIG device whose memory NVML did not give (`memory_bytes: null`) beside one of the same
profile on the same GPU made every refresh raise `TypeError` (None compared with an int while
sorting), and every other server's summary stayed stale. Unknown values are summarized as
unknown; a server whose summary cannot be built is logged, left to its rows and not retried
until its report changes, and every other server is refreshed.
"""

from __future__ import annotations

import json
import logging

import pytest

from inventory.models import AgentToken, MigDevice, Server
from inventory.services import report_apply, report_receive
from inventory.validation import report_errors
from placement import summaries
from placement.models import ServerPlacement
from placement.selectors import fleet_load
from placement.summaries import FAILED, placement_summaries_refresh, stale_servers, summary_of
from tests.reports import make_report

from .fleets import k8s_fleet, pcie_report, placement_answers

pytestmark = pytest.mark.django_db

REQUESTS = [
    {"gpus": 16},
    {"gpus": 4},
    {"gpus": 2, "same_numa": True},
    {"gpus": 2, "nvlink_only": True},
    {"gpus": 2, "mig_profile": "1g.10gb"},
    {"gpus": 8, "min_gpu_memory_bytes": 80 * 2**30},
]


def _poison(hostname: str = "mig-01") -> dict:
    """Two 1g.10gb devices on GPU 0, one of unknown memory; GPU 2 of unknown memory, NUMA
    node and name; a device of unknown profile on GPU 1."""
    report = make_report(hostname, mig_gpus={0: ["1g.10gb", "1g.10gb"], 1: ["3g.40gb"]})
    report["gpus"][0]["mig_devices"][1]["memory_bytes"] = None
    report["gpus"][1]["mig_devices"][0]["profile"] = None
    report["gpus"][2].update(memory_total_bytes=None, numa_node=None, name=None)
    return report


def _reapply(report: dict) -> None:
    token = AgentToken.objects.get(name=report["host"]["hostname"])
    body = json.dumps(report).encode()
    report_apply(report_id=report_receive(token=token, body=body).report_id)


@pytest.fixture
def fleet():
    return k8s_fleet(
        [
            make_report("dgx-01"),
            make_report("dgx-02"),
            _poison("mig-01"),
            pcie_report("pcie-01", [[0, 1], [2, 3]]),
        ]
    )


def test_a_summary_takes_every_unknown_the_schema_allows():
    gpus = [(11, 0, "H100", 80, 0, 1), (12, 1, "", None, None, 0)]
    migs = [("MIG-b", 11, "1g.10gb", None), ("MIG-a", 11, "1g.10gb", 10), ("MIG-c", 11, "", None)]
    built = summary_of(gpus, {"NV18"}, {}, migs)
    assert [m[3] for m in json.loads(built["migs"])] == [10, None, None]
    assert json.loads(built["gpus"])[1] == [12, 1, "", None, None, 0]
    again = summary_of(list(reversed(gpus)), {"NV18"}, {}, list(reversed(migs)))
    assert again["shape"] == built["shape"]  # the unknowns sort the same whatever the order


def test_the_poison_report_is_applied_and_summarized_with_its_memory_unknown(fleet):
    assert report_errors(_poison()) == {}  # legitimate: a MIG device NVML gave no memory of
    mig01 = fleet["mig-01"]
    assert MigDevice.objects.filter(gpu__server=mig01, memory_bytes__isnull=True).count() == 1
    from_rows = placement_answers(REQUESTS)
    assert placement_summaries_refresh() == Server.objects.count() == 4
    assert list(stale_servers()) == []
    migs = json.loads(ServerPlacement.objects.get(server=mig01).migs)
    assert sorted(m[3] is None for m in migs) == [False, False, True]
    assert fleet_load(with_mig=True).summarized == 4
    assert placement_answers(REQUESTS) == from_rows


def test_one_server_failing_leaves_it_stale_and_refreshes_the_others(fleet, monkeypatch, caplog):
    from_rows = placement_answers(REQUESTS)
    dgx02 = fleet["dgx-02"]
    bad_gpus = set(dgx02.gpus.values_list("pk", flat=True))
    built = summaries.summary_of
    calls: list[set[int]] = []

    def poisoned(gpus, *rest):
        calls.append({g[0] for g in gpus})
        if {g[0] for g in gpus} & bad_gpus:
            raise TypeError("secret-value 12345 < None")
        return built(gpus, *rest)

    monkeypatch.setattr(summaries, "summary_of", poisoned)
    with caplog.at_level(logging.ERROR, logger="placement.summaries"):
        assert placement_summaries_refresh() == 3
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert f"server {dgx02.pk}" in logged and "TypeError" in logged
    assert "secret-value" not in logged  # the error's type, never its text
    failed = ServerPlacement.objects.get(server=dgx02)
    assert failed.gpus.startswith(FAILED) and failed.shape == ""
    dgx02.refresh_from_db()
    assert dgx02.placement_shape == ""
    assert fleet_load(with_mig=True).summarized == 3  # dgx-02 is read from its rows
    assert placement_answers(REQUESTS) == from_rows

    calls.clear()
    assert list(stale_servers()) == []  # not retried every run ...
    assert placement_summaries_refresh() == 0
    assert calls == []
    _reapply(make_report("dgx-02", skip_gpus=(7,)))  # ... until its report changes
    assert list(stale_servers()) == [dgx02.pk]
    changed = placement_answers(REQUESTS)
    monkeypatch.setattr(summaries, "summary_of", built)
    assert placement_summaries_refresh() == 1
    assert fleet_load(with_mig=True).summarized == 4
    assert placement_answers(REQUESTS) == changed
    assert not ServerPlacement.objects.get(server=dgx02).gpus.startswith(FAILED)


def test_a_batch_whose_reads_fail_is_rebuilt_one_server_at_a_time(fleet, monkeypatch):
    from_rows = placement_answers(REQUESTS)
    bad = fleet["pcie-01"].pk
    links = summaries.link_rows

    def failing(servers):
        if bad in set(servers.values_list("pk", flat=True)):
            raise ValueError("a row no summary can take")
        return links(servers)

    monkeypatch.setattr(summaries, "link_rows", failing)
    assert placement_summaries_refresh() == 3
    assert ServerPlacement.objects.get(server_id=bad).gpus == f"{FAILED}ValueError"
    assert list(stale_servers()) == []
    assert placement_answers(REQUESTS) == from_rows
    monkeypatch.setattr(summaries, "link_rows", links)
    assert placement_summaries_refresh(server_ids=[bad]) == 1  # named: retried at once
    assert fleet_load().summarized == 4
    assert placement_answers(REQUESTS) == from_rows
