"""A report that changes one server refreshes that server's findings at once (issue 11 §5)."""

from __future__ import annotations

import json

import pytest

from clusters.models import ReconcileState
from findings.choices import FindingType
from findings.models import Finding
from inventory.choices import GpuStatus, ReportStatus
from inventory.models import Gpu
from inventory.services import report_receive
from inventory.services.tokens import agent_token_create
from inventory.signals import report_applied
from inventory.tasks import apply_report
from tests.clusters.test_reconcile_servers import fleet, open_findings
from tests.reports import make_report

pytestmark = pytest.mark.django_db


def post(server, report) -> int:
    token = server.agent_tokens.get()
    return report_receive(token=token, body=json.dumps(report).encode()).report_id


def test_a_lost_gpu_is_a_finding_as_soon_as_the_report_is_applied():
    servers = fleet("dgx-01", "dgx-02")
    # Something only the full pass would judge: dgx-02's GPU goes bad without a report.
    Gpu.objects.filter(server=servers["dgx-02"], index=0).update(status=GpuStatus.ERROR)

    report_id = post(servers["dgx-01"], make_report("dgx-01", skip_gpus=(3,)))
    assert apply_report.run(report_id) == ReportStatus.APPLIED

    assert [(t, h) for t, h, _ in open_findings()] == [
        (FindingType.GPU_COUNT_MISMATCH, "dgx-01"),
        (FindingType.UNHEALTHY_GPU, "dgx-01"),
    ]


def test_the_gpu_coming_back_resolves_it_with_the_next_report():
    servers = fleet("dgx-01")
    apply_report.run(post(servers["dgx-01"], make_report("dgx-01", skip_gpus=(3,))))
    assert open_findings()
    # A new body (the very same bytes as the first report would be that report again).
    apply_report.run(post(servers["dgx-01"], make_report("dgx-01", driver="550.54.16")))
    assert open_findings() == []
    assert Finding.objects.filter(resolved_at__isnull=False).count() == 2


def test_a_new_server_asks_for_the_full_pass_which_binds_and_judges_it():
    fleet("dgx-01")
    ReconcileState.objects.update_or_create(id=1, defaults={"requested_at": None})
    token, _ = agent_token_create(name="spare-01")
    body = json.dumps(make_report("spare-01")).encode()
    report_id = report_receive(token=token, body=body).report_id
    apply_report.run(report_id)
    # In-process tasks: the requested full pass ran and judged the new server.
    assert (FindingType.SERVER_WITHOUT_NODE, "spare-01") in [(t, h) for t, h, _ in open_findings()]


def test_a_failing_receiver_never_fails_the_report():
    servers = fleet("dgx-01")

    def broken(sender, **kwargs):
        raise RuntimeError("boom")

    report_applied.connect(broken, dispatch_uid="test-broken")
    try:
        report_id = post(servers["dgx-01"], make_report("dgx-01", skip_gpus=(1,)))
        assert apply_report.run(report_id) == ReportStatus.APPLIED
    finally:
        report_applied.disconnect(dispatch_uid="test-broken")
    assert open_findings()
