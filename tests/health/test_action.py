"""When a GPU needs action (`health.action`): the rule over plain facts and its SQL form give
the same reason and name the same finding for the same rows, whatever mix of them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from findings.choices import FindingType, Severity
from findings.models import Finding
from health.action import (
    ActionReason,
    GpuAction,
    GpuFacts,
    OpenFinding,
    action_finding_id,
    action_reason_code,
    action_words,
    gpu_action,
    reason_of_code,
    slots_taken,
)
from health.selectors import gpus_needing_action, gpus_needing_action_count
from inventory.models import Gpu
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


def _finding(n: int, type_: str, severity: str, *, gpu=None, server=None, age_h=0, **kw):
    return Finding.objects.create(
        type=type_,
        severity=severity,
        subject=f"{type_}:{n}",
        message=f"finding {n}",
        gpu=gpu,
        server=server or (gpu.server if gpu else None),
        first_seen=timezone.now() - timedelta(hours=age_h),
        **kw,
    )


@pytest.fixture
def fleet():
    """Four servers: one with a lost GPU (and another board since in its slot), one with an
    NVML error and health findings of every severity, one with a critical server finding (and
    a resolved one), one healthy but for a warning about the server."""
    apply_reports(*(make_report(f"dgx-{n}", gpus=4) for n in range(4)))
    gpus = {(g.server.hostname, g.index): g for g in Gpu.objects.select_related("server")}
    lost = gpus[("dgx-0", 1)]
    Gpu.objects.filter(pk=lost.pk).update(status="lost")
    Gpu.objects.filter(pk=gpus[("dgx-0", 2)].pk).update(status="lost", uuid_synthetic=True)
    old = Gpu.objects.create(
        server=lost.server, index=3, uuid="GPU-old-board", status="lost", pci_bus_id="x"
    )
    Gpu.objects.filter(pk=gpus[("dgx-0", 3)].pk).update(pci_bus_id="x")  # its slot, retaken
    Gpu.objects.filter(pk=gpus[("dgx-1", 0)].pk).update(status="error")
    _finding(1, FindingType.GPU_PCIE_DEGRADED, Severity.WARNING, gpu=gpus[("dgx-1", 1)])
    _finding(
        2,
        FindingType.GPU_FATAL_XID,
        Severity.CRITICAL,
        gpu=gpus[("dgx-1", 1)],
        age_h=1,
        details={"codes": ["Xid 79"]},
    )
    _finding(3, FindingType.GPU_RECOVERY_ACTION, Severity.INFO, gpu=gpus[("dgx-1", 2)])
    _finding(4, FindingType.GPU_NOT_IN_NVML, Severity.CRITICAL, server=gpus[("dgx-2", 0)].server)
    _finding(
        5, FindingType.BELOW_PROFILE, Severity.CRITICAL, server=gpus[("dgx-2", 0)].server, age_h=2
    )
    _finding(
        6,
        FindingType.DUPLICATE_GPU,
        Severity.CRITICAL,
        server=gpus[("dgx-3", 0)].server,
        resolved_at=timezone.now(),
    )
    _finding(7, FindingType.DRIVER_SKEW, Severity.WARNING, server=gpus[("dgx-3", 0)].server)
    _finding(
        8,
        FindingType.GPU_UNCORRECTED_ECC,
        Severity.CRITICAL,
        gpu=gpus[("dgx-0", 0)],
        resolved_at=timezone.now(),
    )
    return gpus, old


def _python() -> dict[int, GpuAction | None]:
    rows = list(Gpu.objects.values("id", "server_id", "status", "uuid_synthetic", "pci_bus_id"))
    taken = slots_taken(rows)
    findings = [
        OpenFinding(
            id=f.pk,
            type=f.type,
            severity=f.severity,
            server_id=f.server_id,
            gpu_id=f.gpu_id,
            first_seen=f.first_seen,
            details=f.details,
        )
        for f in Finding.objects.filter(resolved_at__isnull=True)
    ]
    return {
        r["id"]: gpu_action(
            GpuFacts(
                id=r["id"],
                server_id=r["server_id"],
                status=r["status"],
                uuid_synthetic=r["uuid_synthetic"],
                slot_taken=r["id"] in taken,
            ),
            findings,
        )
        for r in rows
    }


def _sql() -> dict[int, GpuAction | None]:
    out: dict[int, GpuAction | None] = {}
    for pk, code, finding in Gpu.objects.annotate(
        code=action_reason_code(), finding=action_finding_id()
    ).values_list("pk", "code", "finding"):
        reason = reason_of_code(code)
        out[pk] = GpuAction(reason, finding) if reason else None
    return out


def test_the_python_and_sql_forms_agree_on_every_row(fleet):
    gpus, old = fleet
    python, sql = _python(), _sql()
    assert python == sql
    reasons = {key: (python[g.pk].reason if python[g.pk] else None) for key, g in gpus.items()}
    assert reasons == {
        ("dgx-0", 0): None,  # its finding resolved
        ("dgx-0", 1): ActionReason.LOST,
        ("dgx-0", 2): ActionReason.LOST_OFF_BUS,  # on the PCI bus, never in NVML
        ("dgx-0", 3): None,
        ("dgx-1", 0): ActionReason.NVML_ERROR,
        ("dgx-1", 1): ActionReason.HEALTH_FINDING,
        ("dgx-1", 2): ActionReason.HEALTH_FINDING,  # even an info one
        ("dgx-1", 3): None,
        **{("dgx-2", i): ActionReason.SERVER_CRITICAL for i in range(4)},
        **{("dgx-3", i): None for i in range(4)},  # a warning, and a resolved critical
    }
    assert python[old.pk] is None  # an RMA's old row: its slot holds another board


def test_the_finding_named_is_the_most_serious_then_the_oldest(fleet):
    gpus, _ = fleet
    python = _python()
    fatal = Finding.objects.get(type=FindingType.GPU_FATAL_XID)
    below = Finding.objects.get(type=FindingType.BELOW_PROFILE)  # older than not-in-NVML
    assert python[gpus[("dgx-1", 1)].pk].finding_id == fatal.pk
    assert python[gpus[("dgx-2", 3)].pk].finding_id == below.pk


def test_a_lost_gpu_on_a_server_with_a_gpu_off_nvml_fell_off_the_bus(fleet):
    gpus, _ = fleet
    Gpu.objects.filter(pk=gpus[("dgx-2", 1)].pk).update(status="lost")
    assert _python() == _sql()
    assert _python()[gpus[("dgx-2", 1)].pk].reason == ActionReason.LOST_OFF_BUS


def test_the_reason_in_words_names_the_finding():
    assert action_words(ActionReason.LOST_OFF_BUS, None, None) == "lost: fell off the bus"
    assert (
        action_words(ActionReason.HEALTH_FINDING, FindingType.GPU_FATAL_XID, {"codes": ["Xid 79"]})
        == "open health finding: Fatal Xid 79"
    )
    assert (
        action_words(ActionReason.SERVER_CRITICAL, FindingType.GPU_NOT_IN_NVML, {})
        == "server has a critical finding: GPU on the PCI bus, not in NVML"
    )


def test_the_health_page_rows_are_the_rule_and_cost_two_queries(fleet, django_assert_num_queries):
    with django_assert_num_queries(2):
        rows = gpus_needing_action()
    expected = {pk for pk, action in _python().items() if action}
    assert {r.gpu_id for r in rows} == expected
    assert gpus_needing_action_count() == len(expected)
    assert rows[0].severity == Severity.CRITICAL
    by_name = {r.name: r.words for r in rows}
    assert by_name["dgx-1 GPU 1"] == "open health finding: Fatal Xid 79"
    assert (
        by_name["dgx-2 GPU 0"]
        == "server has a critical finding: Fewer GPUs than the hardware profile"
    )
