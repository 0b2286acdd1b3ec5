"""Report retention: the newest reports per server stay, pending ones always stay."""

from __future__ import annotations

import pytest

from inventory.choices import ReportStatus
from inventory.models import Report
from inventory.services import report_prune
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


def _copies(server, count: int, status: str) -> list[int]:
    template = Report.objects.filter(server=server).first()
    return [
        Report.objects.create(
            identity=template.identity,
            server=server,
            payload={},
            content_hash=f"{status}-{i}",
            status=status,
        ).pk
        for i in range(count)
    ]


def test_prune_keeps_the_newest_reports_of_each_server_and_every_pending_one():
    servers = apply_reports(make_report("dgx-01", gpus=1), make_report("dgx-02", gpus=1))
    one, two = servers["dgx-01"], servers["dgx-02"]
    pending = _copies(one, 2, ReportStatus.PENDING)
    applied = _copies(one, 4, ReportStatus.APPLIED)
    _copies(two, 1, ReportStatus.APPLIED)
    before = Report.objects.count()

    deleted = report_prune(keep=3)

    assert deleted == before - Report.objects.count() > 0
    kept = set(Report.objects.filter(server=one).values_list("pk", flat=True))
    assert set(applied[-3:]) <= kept and set(pending) <= kept
    assert not (kept - set(applied[-3:]) - set(pending))
    assert Report.objects.filter(server=two).count() == 2  # under the limit: untouched


def test_prune_reads_the_retention_setting(settings):
    settings.ATLAS_REPORT_RETENTION = 1
    servers = apply_reports(make_report("dgx-01", gpus=1))
    newest = _copies(servers["dgx-01"], 2, ReportStatus.APPLIED)[-1]
    report_prune()
    assert list(Report.objects.values_list("pk", flat=True)) == [newest]
