"""Every list of findings has one order: the most severe first, ties by id (not by last seen,
which every reconciliation moves), on the overview, server and node pages, the findings list,
the health page and the API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from findings.choices import FindingType, Severity
from findings.models import Finding
from findings.selectors import open_findings, top_open_findings
from health.selectors import gpus_needing_action
from inventory.models import Gpu
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


def make(n: int, severity: str, *, age_s: int = 0, **kw) -> Finding:
    """A finding whose `last_seen` is `age_s` seconds ago: later ids are seen earlier, so an
    order by last seen would reverse them."""
    kw.setdefault("type", FindingType.NODE_WITHOUT_SERVER)
    return Finding.objects.create(
        severity=severity,
        subject=f"node:prod/gpu-{n:03d}",
        message=f"gpu-{n:03d} has no server",
        last_seen=timezone.now() - timedelta(seconds=age_s),
        **kw,
    )


def mixed(**kw) -> list[Finding]:
    """Warnings, an info and criticals, interleaved; the expected order, worst first by id."""
    rows = [
        make(0, Severity.WARNING, age_s=10, **kw),
        make(1, Severity.INFO, age_s=20, **kw),
        make(2, Severity.CRITICAL, age_s=30, **kw),
        make(3, Severity.WARNING, age_s=0, **kw),
        make(4, Severity.CRITICAL, age_s=0, **kw),
    ]
    return [rows[2], rows[4], rows[0], rows[3], rows[1]]


def ids(rows) -> list[int]:
    return [f.pk for f in rows]


def test_open_findings_are_by_severity_then_id_whatever_was_seen_last():
    expected = mixed()
    assert ids(open_findings()) == ids(expected)
    assert ids(top_open_findings(limit=3)["shown"]) == ids(expected[:3])


def test_a_servers_and_a_nodes_findings_keep_the_same_order(client, user):
    server = apply_reports(make_report("dgx-01"))["dgx-01"]
    expected = mixed(server=server)
    assert ids(open_findings(server_id=server.pk)) == ids(expected)
    client.force_login(user)
    body = client.get(f"/servers/{server.pk}/").content.decode()
    positions = [body.index(f'href="/findings/{f.pk}/"') for f in expected]
    assert positions == sorted(positions)


def test_the_findings_list_page_and_its_csv_are_by_severity_then_id(client, user):
    expected = mixed()
    client.force_login(user)
    body = client.get("/findings/").content.decode()
    positions = [body.index(f'href="/findings/{f.pk}/"') for f in expected]
    assert positions == sorted(positions)
    lines = client.get("/findings/?format=csv").getvalue().decode().splitlines()[1:]
    assert [line.split(",")[0] for line in lines] == [f.severity for f in expected]
    assert [next(w for w in line.split(",") if "gpu-" in w)[:7] for line in lines] == [
        f.message[:7] for f in expected
    ]


def test_the_health_page_lists_critical_before_warning_before_info():
    apply_reports(make_report("dgx-01"))
    gpus = list(Gpu.objects.order_by("index"))
    kinds = (FindingType.GPU_FATAL_XID, FindingType.GPU_PCIE_DEGRADED)
    for gpu, severity, kind in (
        (gpus[0], Severity.INFO, kinds[0]),
        (gpus[1], Severity.WARNING, kinds[1]),
        (gpus[2], Severity.CRITICAL, kinds[0]),
        (gpus[3], Severity.WARNING, kinds[0]),
    ):
        Finding.objects.create(
            type=kind,
            severity=severity,
            subject=f"{kind}:{gpu.pk}",
            message=f"GPU {gpu.index}",
            gpu=gpu,
            server=gpu.server,
        )
    order = [row.index for row in gpus_needing_action()]
    assert order == [2, 1, 3, 0]


def test_the_api_lists_open_findings_first_by_severity_then_id(api):
    expected = mixed()
    resolved = make(9, Severity.CRITICAL)
    resolved.resolved_at = timezone.now()
    resolved.save()
    body = api.get("/api/v1/findings/").json()
    assert [r["id"] for r in body["results"]] == [*ids(expected), resolved.pk]
    by_weight = api.get("/api/v1/findings/?open=true&ordering=severity").json()
    assert [r["id"] for r in by_weight["results"]] == ids(expected)
    lightest = api.get("/api/v1/findings/?open=true&ordering=-severity").json()
    assert [r["severity"] for r in lightest["results"]] == [
        "info",
        "warning",
        "warning",
        "critical",
        "critical",
    ]
    assert [r["id"] for r in lightest["results"]][1:3] == ids(expected[2:4])  # ties by id


def test_the_findings_list_shows_the_first_seen_time_not_only_how_long_ago(client, user):
    (f, *_) = mixed()
    client.force_login(user)
    body = client.get("/findings/").content.decode()
    local = timezone.localtime(f.first_seen).strftime("%Y-%m-%d %H:%M")
    assert f'{local} <span class="muted">(' in body
