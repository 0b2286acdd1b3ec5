"""report_apply: upsert by identity, idempotence, change events, lost and replaced GPUs."""

import copy
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from inventory.choices import ChangeKind, GpuStatus, ReportStatus
from inventory.models import ChangeEvent, Gpu, Link, MigDevice, Nic, Report, Server
from inventory.services import (
    agent_token_create,
    report_apply,
    report_receive,
    revision_bump,
    revision_get,
)
from inventory.services.host_parts import _relink_vms
from tests.reports import make_report

pytestmark = pytest.mark.django_db


def receive_and_apply(report, token=None):
    token = token or agent_token_create(name="t")[0]
    result = report_receive(token=token, body=json.dumps(report).encode())
    if result.status == "unchanged":
        return result, None
    return result, report_apply(report_id=result.report_id)


def test_first_report_creates_server_gpus_mig_nics_links():
    report = make_report("dgx-01", mig_gpus={0: ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]})
    _, applied = receive_and_apply(report)
    assert applied.status == ReportStatus.APPLIED and applied.created
    server = Server.objects.get()
    assert server.hostname == "dgx-01"
    assert server.system_uuid == report["host"]["system_uuid"]
    assert server.identity == f"uuid:{report['host']['system_uuid']}"
    assert Gpu.objects.filter(server=server).count() == 8
    assert MigDevice.objects.filter(gpu__index=0).count() == 4
    assert Nic.objects.count() == 2
    assert Link.objects.filter(gpu_b__isnull=False).count() == 28  # 8 choose 2
    assert Link.objects.filter(nic__isnull=False).count() == 16
    assert set(Link.objects.filter(gpu_b__isnull=False).values_list("link_class", flat=True)) == {
        "NV18"
    }
    assert Link.objects.filter(gpu_b__isnull=False).first().nvlink_count == 18
    assert list(ChangeEvent.objects.values_list("kind", flat=True)) == [ChangeKind.SERVER_ADDED]
    assert Report.objects.get().status == ReportStatus.APPLIED


def test_applying_the_same_report_twice_is_applying_it_once():
    report = make_report("dgx-01", mig_gpus={1: ["1g.10gb"] * 7})
    result, _ = receive_and_apply(report)
    again = report_apply(report_id=result.report_id)
    assert again.status == ReportStatus.APPLIED
    assert Server.objects.count() == 1
    assert Gpu.objects.count() == 8 and MigDevice.objects.count() == 7
    assert ChangeEvent.objects.count() == 1


def test_a_second_identical_report_changes_nothing_but_last_seen():
    token = agent_token_create(name="t")[0]
    report = make_report("dgx-01")
    receive_and_apply(report, token)
    token.refresh_from_db()
    server = Server.objects.get()
    first_seen = server.last_seen
    report["collected_at"] = "2026-11-30T09:00:00Z"  # volatile: not part of the content hash
    result, applied = receive_and_apply(report, token)
    assert result.status == "unchanged" and applied is None
    server.refresh_from_db()
    assert server.last_seen > first_seen
    assert Report.objects.count() == 1


def test_lost_gpu_keeps_its_row_and_history():
    token = agent_token_create(name="t")[0]
    receive_and_apply(make_report("dgx-01"), token)
    token.refresh_from_db()
    report = make_report("dgx-01", skip_gpus=(3,))
    _, applied = receive_and_apply(report, token)
    assert applied.gpus_changed
    lost = Gpu.objects.get(index=3)
    assert lost.status == GpuStatus.LOST
    assert Gpu.objects.exclude(status=GpuStatus.LOST).count() == 7
    event = ChangeEvent.objects.get(kind=ChangeKind.GPU_REMOVED)
    assert event.gpu == lost and "GPU 3" in event.summary


def test_gpu_on_the_pci_bus_but_not_in_nvml_is_named_as_such():
    token = agent_token_create(name="t")[0]
    full = make_report("dgx-01")
    receive_and_apply(full, token)
    token.refresh_from_db()
    report = make_report("dgx-01", skip_gpus=(5,))
    report["pci_gpus"] = copy.deepcopy(full["pci_gpus"])
    report["pci_gpus"][5]["in_nvml"] = False
    receive_and_apply(report, token)
    event = ChangeEvent.objects.get(kind=ChangeKind.GPU_NOT_IN_NVML)
    assert event.gpu.index == 5 and "PCI bus" in event.summary
    assert Server.objects.get().pci_gpu_count == 8


def test_a_gpu_nvml_never_listed_is_a_lost_row_until_nvml_lists_one_at_its_address():
    token = agent_token_create(name="t")[0]
    full = make_report("dgx-01")
    report = make_report("dgx-01", skip_gpus=(5,))
    report["pci_gpus"] = copy.deepcopy(full["pci_gpus"])
    report["pci_gpus"][5]["in_nvml"] = False
    receive_and_apply(report, token)
    lost = Gpu.objects.get(status=GpuStatus.LOST)
    assert (lost.index, lost.pci_bus_id, lost.uuid_synthetic) == (5, "0000:68:00.0", True)
    event = ChangeEvent.objects.get(kind=ChangeKind.GPU_NOT_IN_NVML)
    assert event.gpu == lost and "slot 5" in event.summary
    token.refresh_from_db()
    receive_and_apply(report, token)  # the same again: still one row
    assert Gpu.objects.filter(status=GpuStatus.LOST).count() == 1
    receive_and_apply(full, token)  # NVML lists a GPU at that address: the row goes
    assert not Gpu.objects.filter(status=GpuStatus.LOST).exists()
    assert Gpu.objects.count() == 8
    assert not ChangeEvent.objects.filter(kind=ChangeKind.GPU_REPLACED).exists()


def test_replaced_gpu_at_the_same_pci_address():
    token = agent_token_create(name="t")[0]
    receive_and_apply(make_report("dgx-01"), token)
    token.refresh_from_db()
    report = make_report("dgx-01")
    old_uuid = report["gpus"][2]["uuid"]
    report["gpus"][2]["uuid"] = "GPU-new-card"
    report["gpus"][2]["serial"] = "1650000000999"
    receive_and_apply(report, token)
    event = ChangeEvent.objects.get(kind=ChangeKind.GPU_REPLACED)
    assert event.before["uuid"] == old_uuid and event.after["serial"] == "1650000000999"
    assert Gpu.objects.get(uuid=old_uuid).status == GpuStatus.LOST
    assert Gpu.objects.get(uuid="GPU-new-card").status == GpuStatus.OK
    assert not ChangeEvent.objects.filter(kind=ChangeKind.GPU_REMOVED).exists()


def test_gpu_moved_between_servers_keeps_its_row_and_history():
    a = make_report("dgx-01")
    b = make_report("dgx-02", gpus=7)
    receive_and_apply(a)
    receive_and_apply(b)
    moved_uuid = a["gpus"][7]["uuid"]
    gpu_id = Gpu.objects.get(uuid=moved_uuid).pk
    token_a = Server.objects.get(hostname="dgx-01").agent_tokens.get()
    receive_and_apply(make_report("dgx-01", skip_gpus=(7,)), token_a)  # taken out of dgx-01
    b2 = copy.deepcopy(b)
    b2["gpus"].append({**a["gpus"][7], "index": 7})
    token_b = Server.objects.get(hostname="dgx-02").agent_tokens.get()
    receive_and_apply(b2, token_b)
    gpu = Gpu.objects.get(uuid=moved_uuid)
    assert gpu.pk == gpu_id and gpu.server.hostname == "dgx-02"
    kinds = set(ChangeEvent.objects.filter(gpu=gpu).values_list("kind", "server__hostname"))
    assert (ChangeKind.GPU_MOVED_IN, "dgx-02") in kinds
    assert (ChangeKind.GPU_MOVED_OUT, "dgx-01") in kinds


def test_mig_relayout_and_driver_upgrade_are_recorded():
    token = agent_token_create(name="t")[0]
    receive_and_apply(make_report("a100-01", mig_gpus={0: ["3g.40gb", "3g.40gb"]}), token)
    token.refresh_from_db()
    report = make_report("a100-01", mig_gpus={0: ["1g.10gb"] * 7}, driver="560.35.03")
    receive_and_apply(report, token)
    relayout = ChangeEvent.objects.get(kind=ChangeKind.MIG_RELAYOUT)
    assert "3g.40gb" in relayout.summary and "1g.10gb" in relayout.summary
    assert ChangeEvent.objects.get(kind=ChangeKind.DRIVER_UPGRADE).after == {
        "driver_version": "560.35.03"
    }
    assert MigDevice.objects.count() == 7


def test_older_report_applied_after_a_newer_one_is_superseded():
    token = agent_token_create(name="t")[0]
    old = report_receive(token=token, body=json.dumps(make_report("dgx-01")).encode())
    new = report_receive(token=token, body=json.dumps(make_report("dgx-01", gpus=4)).encode())
    report_apply(report_id=new.report_id)
    assert report_apply(report_id=old.report_id).status == ReportStatus.SUPERSEDED
    assert Gpu.objects.count() == 4


def test_vm_links_to_its_host_from_the_guest_list():
    vm_uuid = "7a3f0000-0000-4000-8000-00000000abcd"
    receive_and_apply(
        make_report(
            "vm-01",
            gpus=2,
            system_uuid=vm_uuid,
            virtualization={"is_virtual": True, "hypervisor": "kvm"},
        )
    )
    receive_and_apply(
        make_report("kvm-host", gpus=0, guests=[{"uuid": vm_uuid.upper(), "name": "vm-01"}])
    )
    vm = Server.objects.get(hostname="vm-01")
    assert vm.physical_host.hostname == "kvm-host"
    assert vm.is_virtual and vm.hypervisor == "kvm"

    # The relink costs what its docstring says: two reads, and an UPDATE only for a move.
    host, now = vm.physical_host, timezone.now()
    Server.objects.filter(pk=vm.pk).update(physical_host=None)
    with CaptureQueriesContext(connection) as moved:
        assert _relink_vms(host, [vm.system_uuid], now) is True
    assert [q["sql"].split()[0] for q in moved.captured_queries] == ["SELECT", "SELECT", "UPDATE"]
    with CaptureQueriesContext(connection) as kept:
        assert _relink_vms(host, [vm.system_uuid], now) is False
    assert len(kept.captured_queries) == 2


def test_apply_costs_the_same_queries_for_1_and_8_gpus():
    def cost(gpus, host):
        token = agent_token_create(name=host)[0]
        receive_and_apply(make_report(host, gpus=gpus, mig_gpus={0: ["1g.10gb"] * 7}), token)
        token.refresh_from_db()
        changed = make_report(host, gpus=gpus, mig_gpus={0: ["3g.40gb"]}, driver="999.1")
        result = report_receive(token=token, body=json.dumps(changed).encode())
        with CaptureQueriesContext(connection) as ctx:
            report_apply(report_id=result.report_id)
        return len(ctx.captured_queries)

    assert cost(1, "small") == cost(8, "big")


def test_a_revision_moves_in_one_update_once_it_exists(django_assert_num_queries):
    with CaptureQueriesContext(connection) as first:
        revision_bump(name="inventory-test")
    assert [q["sql"].split()[0] for q in first.captured_queries].count("INSERT") == 1
    with django_assert_num_queries(1) as queries:
        revision_bump(name="inventory-test")
    assert queries.captured_queries[0]["sql"].startswith("UPDATE")
    assert revision_get(name="inventory-test") == 2
