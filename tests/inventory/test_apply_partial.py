"""A partial report (`partial: true`, a trimmed capture, `nvidia-smi -L`) adds and updates
what it describes and leaves the rest as it was: nothing lost, nothing removed."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent.schema import report_digest
from inventory.choices import ChangeKind, GpuStatus, ReportStatus
from inventory.models import AgentToken, ChangeEvent, Disk, Gpu, Guest, Link, MigDevice, Nic, Server
from inventory.services import agent_token_create, report_apply, report_receive
from inventory.services.ingest import heartbeat_by_digest
from inventory.services.tokens import AgentTokenState
from tests.reports import make_report

pytestmark = pytest.mark.django_db

REMOVALS = {ChangeKind.GPU_REMOVED, ChangeKind.GPU_NOT_IN_NVML, ChangeKind.GPU_REPLACED}


def listing(
    full: dict[str, Any], indexes: range | tuple[int, ...], *, reason: str = "nvidia-smi -L"
) -> dict[str, Any]:
    """What `nvidia-smi -L` tells of `full`'s server: index, name, UUID and MIG devices of
    some GPUs; no bus id, memory, serial, NICs, links, disks or PCI listing."""
    gpus = []
    for gpu in full["gpus"]:
        if gpu["index"] not in indexes:
            continue
        gpus.append(
            {
                "index": gpu["index"],
                "uuid": gpu["uuid"],
                "name": gpu["name"],
                "serial": None,
                "pci_bus_id": None,
                "memory_total_bytes": None,
                "mig_devices": copy.deepcopy(gpu["mig_devices"]),
            }
        )
    return {
        "schema": full["schema"],
        "agent": {"version": "0.1.0", "source": "nvidia-smi"},
        "collected_at": "2026-11-30T09:00:00Z",
        "partial": True,
        "partial_reason": reason,
        "host": {
            "hostname": full["host"]["hostname"],
            "system_uuid": full["host"]["system_uuid"],
        },
        "driver": None,
        "gpus": gpus,
    }


@pytest.fixture
def push():
    """Receive and apply reports as one agent token would; returns (receive, apply) results."""
    token = agent_token_create(name="t")[0]

    def push(report: dict[str, Any]):
        token.refresh_from_db()
        received = report_receive(token=token, body=json.dumps(report).encode())
        if received.status == "unchanged":
            return received, None
        return received, report_apply(report_id=received.report_id)

    return push


def test_a_partial_report_of_4_gpus_leaves_8_active_and_removes_nothing(push):
    full = make_report("dgx-01")
    push(full)
    before = {g.uuid: g for g in Gpu.objects.all()}
    links = set(Link.objects.values_list("gpu_a_id", "gpu_b_id", "nic_id", "link_class"))

    _, applied = push(listing(full, range(4)))
    assert applied.status == ReportStatus.APPLIED
    assert not REMOVALS & set(applied.events)
    assert applied.events == []  # nothing it lists changed
    assert Gpu.objects.count() == 8
    assert not Gpu.objects.filter(status=GpuStatus.LOST).exists()
    # The listing's nulls keep what the full report said.
    for gpu in Gpu.objects.filter(index__lt=4):
        known = before[gpu.uuid]
        assert (gpu.serial, gpu.pci_bus_id, gpu.memory_total_bytes) == (
            known.serial,
            known.pci_bus_id,
            known.memory_total_bytes,
        )
        assert gpu.serial and gpu.pci_bus_id and gpu.memory_total_bytes == 80 * 2**30
        assert gpu.power_limit_w == 700.0 and gpu.numa_node == known.numa_node
    # NICs, links and host facts it does not mention stay.
    assert list(Nic.objects.values_list("name", flat=True)) == ["mlx5_0", "mlx5_1"]
    assert set(Link.objects.values_list("gpu_a_id", "gpu_b_id", "nic_id", "link_class")) == links
    server = Server.objects.get()
    assert server.fqdn == "dgx-01.cluster.example" and server.cpu_cores == 112
    assert server.memory_total_bytes == 2 * 2**40 and server.driver_version == "550.54.15"
    assert server.addresses == full["host"]["addresses"]
    assert server.pci_gpu_count == 8 and len(server.pci_gpus) == 8
    assert server.last_report_partial and server.last_report_partial_reason == "nvidia-smi -L"
    assert not ChangeEvent.objects.filter(kind__in=REMOVALS).exists()


def test_a_full_report_after_a_partial_one_still_marks_a_missing_gpu_lost(push):
    full = make_report("dgx-01")
    push(full)
    push(listing(full, range(4)))
    _, applied = push(make_report("dgx-01", skip_gpus=(7,)))
    assert applied.status == ReportStatus.APPLIED
    lost = Gpu.objects.get(status=GpuStatus.LOST)
    assert lost.index == 7
    assert ChangeEvent.objects.get(kind=ChangeKind.GPU_REMOVED).gpu == lost
    server = Server.objects.get()
    assert not server.last_report_partial and server.last_report_partial_reason == ""


def test_a_partial_report_with_mig_devices_of_gpu_0_leaves_the_other_gpus_mig_devices(push):
    full = make_report("dgx-01", mig_gpus={0: ["3g.40gb", "3g.40gb"], 1: ["1g.10gb"] * 7})
    push(full)
    gpu1_devices = list(MigDevice.objects.filter(gpu__index=1).values_list("id", "uuid", "profile"))
    assert len(gpu1_devices) == 7

    partial = listing(full, range(8))
    for gpu in partial["gpus"]:
        if gpu["index"] != 0:
            gpu["mig_devices"] = []  # only GPU 0's devices are described
    # GPU 0 is re-laid out: a new device takes the first device's slot, the second stays.
    first = partial["gpus"][0]["mig_devices"][0]
    first.update(uuid="MIG-00000000-0000-4000-8000-000000000001", profile="2g.20gb")
    _, applied = push(partial)

    assert (
        list(MigDevice.objects.filter(gpu__index=1).values_list("id", "uuid", "profile"))
        == gpu1_devices
    )
    gpu0 = dict(MigDevice.objects.filter(gpu__index=0).values_list("uuid", "profile"))
    assert gpu0 == {
        first["uuid"]: "2g.20gb",
        full["gpus"][0]["mig_devices"][1]["uuid"]: "3g.40gb",
    }
    assert MigDevice.objects.count() == 9
    relayouts = ChangeEvent.objects.filter(kind=ChangeKind.MIG_RELAYOUT)
    assert [e.gpu.index for e in relayouts] == [0]
    assert applied.events == [ChangeKind.MIG_RELAYOUT]
    # The listing gives no MIG mode: the known one stays.
    assert Gpu.objects.filter(mig_mode_current=True).count() == 2


def test_a_partial_report_that_omits_nics_links_disks_and_guests_keeps_them(push):
    full = make_report("kvm-host", guests=[{"uuid": "7a3f0000-0000-4000-8000-00000000abcd"}])
    full["disks"] = [{"name": "nvme0n1", "model": "Samsung PM1733", "size_bytes": 2**41}]
    push(full)
    counts = (Nic.objects.count(), Link.objects.count(), Disk.objects.count())
    assert counts == (2, 28 + 16, 1) and Guest.objects.count() == 1
    push(listing(full, range(8)))
    assert (Nic.objects.count(), Link.objects.count(), Disk.objects.count()) == counts
    assert Guest.objects.count() == 1


def test_a_partial_report_updates_the_nics_and_links_it_lists_and_keeps_the_rest(push):
    full = make_report("dgx-01")
    push(full)
    partial = listing(full, (0, 1))
    partial["nics"] = [{"name": "mlx5_0", "state": "down", "speed_mbps": None}, {"name": "ib9"}]
    partial["links"] = [
        {"a": "gpu:1", "b": "gpu:0", "link_class": "NV12"},  # either order: one pair
        {"a": "gpu:0", "b": "nic:mlx5_0", "link_class": "PXB"},
    ]
    push(partial)

    nics = {n.name: n for n in Nic.objects.all()}
    assert set(nics) == {"mlx5_0", "mlx5_1", "ib9"}
    assert nics["mlx5_0"].state == "down" and nics["mlx5_0"].speed_mbps == 400000
    assert nics["mlx5_0"].pci_bus_id == "0000:19:00.0"
    assert Link.objects.count() == 28 + 16  # replaced in place, none added or dropped
    pair = Link.objects.get(gpu_a__index=0, gpu_b__index=1)
    assert (pair.link_class, pair.nvlink_count) == ("NV12", 12)
    assert Link.objects.get(gpu_a__index=0, nic__name="mlx5_0").link_class == "PXB"
    assert Link.objects.get(gpu_a__index=0, gpu_b__index=2).link_class == "NV18"


def test_a_partial_report_brings_back_a_lost_gpu_it_lists(push):
    full = make_report("dgx-01")
    push(full)
    push(make_report("dgx-01", skip_gpus=(3,)))
    assert Gpu.objects.get(index=3).status == GpuStatus.LOST
    _, applied = push(listing(full, (3,)))
    assert Gpu.objects.get(index=3).status == GpuStatus.OK
    assert applied.events == [ChangeKind.GPU_RETURNED]


def test_a_partial_report_keeps_a_gpu_the_pci_bus_shows_but_nvml_never_listed(push):
    full = make_report("dgx-01", skip_gpus=(5,))
    full["pci_gpus"] = make_report("dgx-01")["pci_gpus"]
    full["pci_gpus"][5]["in_nvml"] = False
    full["warnings"] = ["GPU at 0000:68:00.0 is on the PCI bus but NVML does not show it"]
    push(full)
    placeholder = Gpu.objects.get(status=GpuStatus.LOST)
    partial = listing(full, range(3))
    partial["warnings"] = ["nvidia-smi -L only"]
    push(partial)
    assert Gpu.objects.get(status=GpuStatus.LOST) == placeholder
    server = Server.objects.get()
    assert server.pci_gpu_count == 8
    assert server.warnings == ["nvidia-smi -L only", *full["warnings"]]


def test_a_partial_report_on_a_new_server_creates_what_it_describes(push):
    full = make_report("dgx-09", mig_gpus={0: ["1g.10gb"] * 7})
    _, applied = push(listing(full, range(2), reason="a trimmed capture"))
    assert applied.created and applied.events == [ChangeKind.SERVER_ADDED]
    server = Server.objects.get()
    assert server.hostname == "dgx-09" and server.identity == f"uuid:{full['host']['system_uuid']}"
    assert list(server.gpus.values_list("index", "status")) == [(0, "ok"), (1, "ok")]
    assert MigDevice.objects.count() == 7
    assert server.last_report_partial_reason == "a trimmed capture"


def test_a_full_report_after_a_partial_one_is_applied_not_taken_for_a_heartbeat(push):
    full = make_report("dgx-01")
    push(full)
    partial = listing(full, range(4))
    push(partial)
    again, _ = push(partial)
    assert again.status == "unchanged"  # the same partial facts: nothing to apply

    state = AgentTokenState.of(AgentToken.objects.get(server=Server.objects.get()))
    assert heartbeat_by_digest(state=state, digest=report_digest(full)) is None

    # The full facts differ from the partial ones: applied in full, and what it lacks goes.
    full_again = make_report("dgx-01", nics=1)
    received, applied = push(full_again)
    assert received.status == ReportStatus.PENDING and applied.status == ReportStatus.APPLIED
    assert list(Nic.objects.values_list("name", flat=True)) == ["mlx5_0"]
    server = Server.objects.get()
    assert server.last_report_hash == report_digest(full_again)
    assert not server.last_report_partial


def test_a_partial_apply_costs_the_same_queries_for_1_and_8_gpus():
    def cost(gpus, host):
        token = agent_token_create(name=host)[0]
        full = make_report(host, gpus=gpus, mig_gpus={0: ["1g.10gb"] * 7})
        report_apply(
            report_id=report_receive(token=token, body=json.dumps(full).encode()).report_id
        )
        token.refresh_from_db()
        partial = listing(full, range(gpus))
        partial["nics"] = [{"name": "mlx5_0", "state": "down"}]
        partial["links"] = [{"a": "gpu:0", "b": "nic:mlx5_0", "link_class": "PXB"}]
        result = report_receive(token=token, body=json.dumps(partial).encode())
        with CaptureQueriesContext(connection) as ctx:
            report_apply(report_id=result.report_id)
        return len(ctx.captured_queries)

    assert cost(1, "small") == cost(8, "big")


def test_a_gpu_a_partial_report_moves_in_keeps_its_card_facts_not_its_old_slot():
    a, b = make_report("dgx-01"), make_report("dgx-02", gpus=7)
    tokens = {}
    for report in (a, b):
        tokens[report["host"]["hostname"]] = token = agent_token_create(name="t")[0]
        result = report_receive(token=token, body=json.dumps(report).encode())
        report_apply(report_id=result.report_id)
    moved = a["gpus"][7]
    dgx01 = make_report("dgx-01", skip_gpus=(7,))  # taken out of dgx-01
    tokens["dgx-01"].refresh_from_db()
    report_apply(
        report_id=report_receive(token=tokens["dgx-01"], body=json.dumps(dgx01).encode()).report_id
    )
    partial = listing(b, range(7))
    partial["gpus"].append({"index": 7, "uuid": moved["uuid"], "name": moved["name"]})
    tokens["dgx-02"].refresh_from_db()
    result = report_receive(token=tokens["dgx-02"], body=json.dumps(partial).encode())
    applied = report_apply(report_id=result.report_id)
    assert ChangeKind.GPU_MOVED_IN in applied.events
    gpu = Gpu.objects.get(uuid=moved["uuid"])
    assert gpu.server.hostname == "dgx-02" and gpu.status == GpuStatus.OK
    assert gpu.serial == moved["serial"] and gpu.memory_total_bytes == 80 * 2**30
    assert gpu.pci_bus_id == ""  # the old server's slot is not this one's


def test_a_listing_without_instance_ids_keeps_the_known_ones_and_moves_no_device(push):
    """`nvidia-smi -L` of current drivers names MIG devices by UUID and profile only."""
    full = make_report("dgx-01", mig_gpus={0: ["3g.40gb", "2g.20gb", "1g.10gb"]})
    push(full)
    known = set(MigDevice.objects.values_list("uuid", "gpu_instance_id", "compute_instance_id"))
    partial = listing(full, (0,))
    for device in partial["gpus"][0]["mig_devices"]:
        device.update(gpu_instance_id=None, compute_instance_id=None, memory_bytes=None)
    _, applied = push(partial)
    assert applied.status == ReportStatus.APPLIED
    assert (
        set(MigDevice.objects.values_list("uuid", "gpu_instance_id", "compute_instance_id"))
        == known
    )
    assert None not in set(MigDevice.objects.values_list("memory_bytes", flat=True))
    assert not ChangeEvent.objects.filter(kind=ChangeKind.MIG_RELAYOUT).exists()


def test_the_shared_mig_listing_arrives_with_its_devices_and_no_instance_ids(push):
    """The real `nvidia-smi -L` sample, read by the agent, applied on a new server."""
    from agent.sources.saved import build_saved_report, parse_nvidia_smi
    from tests.fixtures.scheduler import sample_path

    log = parse_nvidia_smi(sample_path("nvsmi-L-h100-mig-mixed-nvdocs.txt").read_bytes())
    report = build_saved_report(
        smi_log=log, hostname="h100-mig", system_uuid="4c4c4544-0000-1000-8000-000000000001"
    )
    _, applied = push(report)
    assert applied.status == ReportStatus.APPLIED
    devices = list(MigDevice.objects.order_by("profile").values_list("profile", "gpu_instance_id"))
    assert devices == [("1g.10gb", None), ("1g.10gb", None), ("2g.20gb", None), ("3g.40gb", None)]
    server = Server.objects.get()
    assert server.last_report_partial and "nvidia-smi -L" in server.last_report_partial_reason


def test_a_full_report_may_not_leave_instance_ids_null():
    from inventory.validation import report_errors

    full = make_report("dgx-01", mig_gpus={0: ["1g.10gb"]})
    full["gpus"][0]["mig_devices"][0]["gpu_instance_id"] = None
    assert "gpus.0.mig_devices.0" in report_errors(full)
    full["partial"], full["partial_reason"] = True, "trimmed"
    assert "gpus.0.mig_devices.0" not in report_errors(full)
