"""Two reports of one server applied at the same moment, on real PostgreSQL."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection, connections

from inventory.models import Gpu, MigDevice, Report, Server
from inventory.services import agent_token_create, report_apply, report_receive
from tests.conftest import require
from tests.reports import make_report

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _postgres_only():
    require(
        connection.vendor == "postgresql",
        "needs DATABASE_URL=postgres://... (row locks and concurrent writers)",
    )


def apply_together(report_ids: list[int]) -> list:
    barrier = threading.Barrier(len(report_ids))
    results, errors = [], []

    def run(report_id: int) -> None:
        try:
            barrier.wait(timeout=10)
            results.append(report_apply(report_id=report_id).status)
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(rid,)) for rid in report_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    return results


@pytest.mark.parametrize("rounds", range(3))
def test_two_reports_of_a_new_server_never_duplicate_rows(rounds):
    token = agent_token_create(name="race")[0]
    first = make_report("dgx-race", mig_gpus={0: ["1g.10gb"] * 7})
    second = make_report("dgx-race", mig_gpus={0: ["3g.40gb", "3g.40gb"]}, driver="999.9")
    ids = [
        report_receive(token=token, body=json.dumps(r).encode()).report_id for r in (first, second)
    ]
    statuses = apply_together(ids)
    assert sorted(statuses) in (["applied", "applied"], ["applied", "superseded"])
    assert Server.objects.count() == 1
    assert Gpu.objects.count() == 8
    # Whichever thread won the lock, the newest report is what the inventory shows, whole.
    assert MigDevice.objects.count() == 2
    assert Server.objects.get().last_report_id == ids[1]
    assert Report.objects.filter(status="pending").count() == 0
