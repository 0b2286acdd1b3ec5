"""An agent token writes only its own server: every cross-server reference a report can make.

References: GPU UUIDs, MIG device UUIDs, GPU links (by GPU index), guest UUIDs (VM to host),
and the per-server keys (hostname, machine-id, addresses, NIC names and MACs). The server
identity itself is bound to one token (tests/api/test_reports_api.py).
"""

from __future__ import annotations

import copy
import json
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from clusters.reconcile import reconcile_all
from findings.choices import FindingType, Severity
from findings.models import Finding
from inventory.choices import ChangeKind, GpuStatus, ReportStatus
from inventory.models import ChangeEvent, Gpu, GpuClaim, Link, MigDevice, Nic, Server
from inventory.services import agent_token_create, report_apply, report_receive
from inventory.services.host_parts import GuestClaim, vm_host_for
from tests.reports import make_report

pytestmark = pytest.mark.django_db

VIRTUAL = {"is_virtual": True, "hypervisor": "kvm"}


class Agent:
    """One server's agent: its own token, posting through the real ingest and apply."""

    def __init__(self, hostname: str) -> None:
        self.hostname = hostname
        self.token = agent_token_create(name=hostname)[0]

    def send(self, report: dict):
        result = report_receive(token=self.token, body=json.dumps(report).encode())
        applied = None
        if result.status != "unchanged":
            applied = report_apply(report_id=result.report_id)
        self.token.refresh_from_db()
        return result.status, applied

    @property
    def server(self) -> Server:
        return Server.objects.get(pk=self.token.server_id)


def open_findings(type_: str) -> list[Finding]:
    return list(Finding.objects.filter(type=type_, resolved_at__isnull=True))


def holder_state(server: Server) -> dict:
    """Everything of a server another server's report must not change."""
    server.refresh_from_db()
    return {
        "gpus": sorted(Gpu.objects.filter(server=server).values_list("uuid", "status", "index")),
        "migs": sorted(MigDevice.objects.filter(gpu__server=server).values_list("uuid", "gpu_id")),
        "nics": sorted(Nic.objects.filter(server=server).values_list("id", "name", "mac")),
        "links": Link.objects.filter(server=server).count(),
        "events": ChangeEvent.objects.filter(server=server).count(),
        "hash": server.last_report_hash,
        "pci_gpu_count": server.pci_gpu_count,
        "hostname": server.hostname,
        "machine_id": server.machine_id,
        "addresses": server.addresses,
        "physical_host": server.physical_host_id,
    }


def claiming(report: dict, other: dict, index: int) -> dict:
    """`report` with its GPU `index` replaced by `other`'s GPU of that index (UUID, serial)."""
    new = copy.deepcopy(report)
    new["gpus"][index]["uuid"] = other["gpus"][index]["uuid"]
    new["gpus"][index]["serial"] = other["gpus"][index]["serial"]
    return new


def go_offline(agent: Agent) -> None:
    long_ago = timezone.now() - timedelta(seconds=settings.ATLAS_SERVER_OFFLINE_AFTER_S + 60)
    Server.objects.filter(pk=agent.token.server_id).update(last_seen=long_ago)


@pytest.fixture
def two_servers():
    """dgx-01 reporting its 8 GPUs; dgx-02 whose report lists dgx-01's GPU 7 as its own."""
    a, b = Agent("dgx-01"), Agent("dgx-02")
    report_a = make_report("dgx-01")
    a.send(report_a)
    report_b = claiming(make_report("dgx-02"), report_a, 7)
    return a, b, report_a, report_b


# -- GPU UUIDs --------------------------------------------------------------------------------


def test_report_claiming_another_live_servers_gpu_changes_nothing_there(two_servers):
    a, b, report_a, report_b = two_servers
    before = holder_state(a.server)
    claimed = report_a["gpus"][7]["uuid"]

    _, applied = b.send(report_b)

    assert applied.status == ReportStatus.APPLIED and applied.claims == [claimed]
    assert holder_state(a.server) == before
    gpu = Gpu.objects.get(uuid=claimed)
    assert gpu.server == a.server and gpu.status == GpuStatus.OK
    assert Gpu.objects.filter(server=b.server).count() == 7
    # no link of dgx-02 reaches dgx-01's GPU, and dgx-02 does not miss it on its PCI bus
    assert not Link.objects.filter(server=b.server, gpu_a=gpu).exists()
    assert not Link.objects.filter(server=b.server, gpu_b=gpu).exists()
    assert Link.objects.filter(server=b.server, gpu_b__isnull=False).count() == 21  # 7 choose 2
    assert b.server.pci_gpu_count == 7
    claim = GpuClaim.objects.get()
    assert (claim.server, claim.gpu, claim.mig_device) == (b.server, gpu, None)
    # the holder's next identical report is still a heartbeat, and it keeps its 8 GPUs
    assert a.send(report_a) == ("unchanged", None)
    assert Gpu.objects.filter(server=a.server, status=GpuStatus.OK).count() == 8


def test_a_gpu_reported_by_two_servers_is_a_finding_naming_both_not_a_fallen_gpu(two_servers):
    _, b, report_a, report_b = two_servers
    b.send(report_b)
    reconcile_all()
    (finding,) = open_findings(FindingType.DUPLICATE_GPU)
    assert finding.severity == Severity.WARNING and finding.server == b.server
    assert finding.message.startswith("dgx-02 reports 1 GPU that dgx-01 also reports")
    assert report_a["gpus"][7]["serial"] in finding.message
    assert finding.details["uuids"] == [report_a["gpus"][7]["uuid"]]
    assert open_findings(FindingType.GPU_NOT_IN_NVML) == []  # neither server lost a GPU


def test_the_claimants_next_copy_is_applied_again_not_taken_for_a_heartbeat(two_servers):
    _, b, _, report_b = two_servers
    b.send(report_b)
    first_seen = GpuClaim.objects.get().first_seen
    status, applied = b.send(report_b)
    assert status == "pending" and applied.status == ReportStatus.APPLIED
    claim = GpuClaim.objects.get()
    assert claim.first_seen == first_seen and claim.last_seen > first_seen


def test_the_move_becomes_real_once_the_holder_stops_listing_the_gpu(two_servers):
    a, b, report_a, report_b = two_servers
    claimed = report_a["gpus"][7]["uuid"]
    b.send(report_b)
    reconcile_all()
    a.send(make_report("dgx-01", skip_gpus=(7,)))  # the holder's own report drops it
    reconcile_all()
    (finding,) = Finding.objects.filter(type=FindingType.DUPLICATE_GPU)
    assert finding.resolved_at is not None  # the conflict ended with the holder's report

    _, applied = b.send(report_b)  # the same report as before: now the move is real

    assert applied.claims == [] and not GpuClaim.objects.exists()
    gpu = Gpu.objects.get(uuid=claimed)
    assert gpu.server == b.server and gpu.status == GpuStatus.OK
    events = set(ChangeEvent.objects.filter(gpu=gpu).values_list("kind", "server__hostname"))
    assert events == {
        (ChangeKind.GPU_REMOVED, "dgx-01"),  # the holder's own report
        (ChangeKind.GPU_MOVED_IN, "dgx-02"),
        (ChangeKind.GPU_MOVED_OUT, "dgx-01"),
    }
    assert Link.objects.filter(server=b.server, gpu_b__isnull=False).count() == 28
    assert b.server.last_report_hash  # what was applied is the report: heartbeats again
    reconcile_all()
    assert open_findings(FindingType.DUPLICATE_GPU) == []
    assert open_findings(FindingType.GPU_NOT_IN_NVML) == []


def test_the_move_becomes_real_when_the_holder_is_offline_and_its_next_report_is_applied(
    two_servers,
):
    a, b, report_a, report_b = two_servers
    claimed = report_a["gpus"][7]["uuid"]
    b.send(report_b)
    go_offline(a)

    b.send(report_b)

    assert Gpu.objects.get(uuid=claimed).server == b.server
    holder = a.server
    assert holder.last_report_hash == ""  # changed by another's report: no heartbeat next
    assert holder.pci_gpu_count == 7  # the GPU left its PCI count too: no "fell off the bus"
    reconcile_all()
    assert open_findings(FindingType.GPU_NOT_IN_NVML) == []

    status, applied = a.send(report_a)  # back, still listing the GPU: applied in full

    assert status == "pending" and applied.claims == [claimed]
    assert Gpu.objects.get(uuid=claimed).server == b.server  # dgx-02 is live and lists it
    reconcile_all()
    (finding,) = open_findings(FindingType.DUPLICATE_GPU)
    assert finding.server == a.server and "dgx-01 reports 1 GPU that dgx-02" in finding.message
    assert open_findings(FindingType.GPU_NOT_IN_NVML) == []


def test_a_claim_ends_when_the_claimant_stops_listing_the_gpu(two_servers):
    _, b, _, report_b = two_servers
    b.send(report_b)
    reconcile_all()
    b.send(make_report("dgx-02", skip_gpus=(7,)))
    assert not GpuClaim.objects.exists()
    reconcile_all()
    assert open_findings(FindingType.DUPLICATE_GPU) == []


def test_a_finding_needs_both_servers_live():
    a, b = Agent("dgx-01"), Agent("dgx-02")
    report_a = make_report("dgx-01")
    a.send(report_a)
    b.send(claiming(make_report("dgx-02"), report_a, 3))
    go_offline(b)  # the claimant went quiet: its old claim is no conflict
    reconcile_all()
    assert open_findings(FindingType.DUPLICATE_GPU) == []


# -- MIG device UUIDs -------------------------------------------------------------------------


def test_report_claiming_another_live_servers_mig_device_changes_nothing_there():
    a, b = Agent("a100-01"), Agent("a100-02")
    report_a = make_report("a100-01", gpus=2, mig_gpus={0: ["3g.40gb", "3g.40gb"]})
    a.send(report_a)
    before = holder_state(a.server)
    report_b = make_report("a100-02", gpus=2, mig_gpus={0: ["3g.40gb", "3g.40gb"]})
    stolen = report_a["gpus"][0]["mig_devices"][1]["uuid"]
    report_b["gpus"][0]["mig_devices"][1]["uuid"] = stolen

    _, applied = b.send(report_b)

    assert applied.claims == [stolen]
    assert holder_state(a.server) == before
    assert MigDevice.objects.get(uuid=stolen).gpu.server == a.server
    assert MigDevice.objects.filter(gpu__server=b.server).count() == 1
    claim = GpuClaim.objects.get()
    assert claim.mig_device.uuid == stolen and claim.gpu.server == a.server
    reconcile_all()
    (finding,) = open_findings(FindingType.DUPLICATE_GPU)
    assert "a100-02 reports 1 MIG device that a100-01 also reports" in finding.message

    go_offline(a)  # the holder is offline: the claimant's next report takes it
    b.send(report_b)
    assert MigDevice.objects.get(uuid=stolen).gpu.server == b.server
    assert not GpuClaim.objects.exists() and a.server.last_report_hash == ""


def test_the_mig_devices_of_a_claimed_gpu_stay_with_it():
    a, b = Agent("a100-01"), Agent("a100-02")
    report_a = make_report("a100-01", gpus=2, mig_gpus={1: ["1g.10gb"] * 7})
    a.send(report_a)
    report_b = copy.deepcopy(make_report("a100-02", gpus=2))
    report_b["gpus"][1] = copy.deepcopy(report_a["gpus"][1])  # GPU and its MIG devices
    before = holder_state(a.server)
    _, applied = b.send(report_b)
    assert applied.claims == [report_a["gpus"][1]["uuid"]]  # one claim: the GPU
    assert holder_state(a.server) == before
    assert MigDevice.objects.filter(gpu__server=b.server).count() == 0


# -- guest UUIDs: a VM under its host ---------------------------------------------------------

HOST_1, HOST_2 = (
    "11111111-1111-4111-8111-111111111111",
    "11111111-1111-4111-8111-111111111112",
)
VM = "22222222-2222-4222-8222-222222222221"


def host_report(name: str, system_uuid: str, guests: list[dict]) -> dict:
    return make_report(name, gpus=0, system_uuid=system_uuid, guests=guests)


def test_guest_list_never_parents_a_physical_server():
    physical = Agent("dgx-01")
    physical.send(make_report("dgx-01", system_uuid=VM))  # no virtualization: physical
    before = holder_state(physical.server)
    Agent("kvm-01").send(host_report("kvm-01", HOST_1, [{"uuid": VM, "state": "running"}]))
    assert holder_state(physical.server) == before
    assert physical.server.physical_host is None


def test_a_guest_links_only_the_virtual_server_whose_own_report_gives_that_uuid():
    vm, other = Agent("vm-01"), Agent("vm-02")
    vm.send(make_report("vm-01", gpus=2, system_uuid=VM, virtualization=VIRTUAL))
    other.send(make_report("vm-02", gpus=2, virtualization=VIRTUAL))
    Agent("kvm-01").send(
        host_report("kvm-01", HOST_1, [{"uuid": VM.upper(), "state": "running"}] * 2)
    )  # upper-case, and listed twice: one guest
    assert vm.server.physical_host.hostname == "kvm-01"
    assert other.server.physical_host is None


def test_a_second_host_listing_a_running_vm_does_not_take_it():
    vm = Agent("vm-01")
    vm_report = make_report("vm-01", gpus=2, system_uuid=VM, virtualization=VIRTUAL)
    vm.send(vm_report)
    Agent("kvm-01").send(host_report("kvm-01", HOST_1, [{"uuid": VM, "state": "running"}]))
    before = holder_state(vm.server)
    Agent("kvm-02").send(host_report("kvm-02", HOST_2, [{"uuid": VM, "state": "running"}]))
    assert holder_state(vm.server) == before
    vm_report["host"]["kernel"] = "6.1.0-99"  # the VM's own next report keeps it there too
    vm.send(vm_report)
    assert vm.server.physical_host.hostname == "kvm-01"


def test_a_vm_follows_its_migration_to_the_host_where_it_runs():
    vm, kvm1, kvm2 = Agent("vm-01"), Agent("kvm-01"), Agent("kvm-02")
    vm.send(make_report("vm-01", gpus=2, system_uuid=VM, virtualization=VIRTUAL))
    kvm1.send(host_report("kvm-01", HOST_1, [{"uuid": VM, "state": "running"}]))
    kvm2.send(host_report("kvm-02", HOST_2, [{"uuid": VM, "state": "shut off"}]))
    assert vm.server.physical_host.hostname == "kvm-01"
    kvm2.send(host_report("kvm-02", HOST_2, [{"uuid": VM, "state": "running"}]))
    kvm1.send(host_report("kvm-01", HOST_1, [{"uuid": VM, "state": "shut off"}]))
    assert vm.server.physical_host.hostname == "kvm-02"
    kvm2.send(host_report("kvm-02", HOST_2, []))  # undefined on kvm-02: back to kvm-01's
    assert vm.server.physical_host.hostname == "kvm-01"
    kvm1.send(host_report("kvm-01", HOST_1, []))  # listed by no host
    assert vm.server.physical_host is None


def test_a_server_whose_own_report_says_physical_hangs_under_no_host():
    vm = Agent("vm-01")
    vm.send(make_report("vm-01", gpus=2, system_uuid=VM, virtualization=VIRTUAL))
    Agent("kvm-01").send(host_report("kvm-01", HOST_1, [{"uuid": VM, "state": "running"}]))
    assert vm.server.physical_host is not None
    vm.send(make_report("vm-01", gpus=2, system_uuid=VM))
    assert vm.server.physical_host is None


def test_a_physical_host_set_by_a_person_is_never_changed_by_reports():
    vm = Agent("vm-01")
    vm_report = make_report("vm-01", gpus=2, system_uuid=VM, virtualization=VIRTUAL)
    vm.send(vm_report)
    rack_host = Agent("dgx-09")
    rack_host.send(make_report("dgx-09", gpus=0))
    Server.objects.filter(hostname="vm-01").update(
        physical_host=rack_host.server, physical_host_manual=True
    )
    Agent("kvm-01").send(host_report("kvm-01", HOST_1, [{"uuid": VM, "state": "running"}]))
    vm_report["host"]["kernel"] = "6.1.0-99"
    vm.send(vm_report)
    assert vm.server.physical_host.hostname == "dgx-09"


@pytest.mark.parametrize(
    ("current", "claims", "expected"),
    [
        (None, [], None),
        (5, [], None),
        (None, [GuestClaim(3, True, True), GuestClaim(2, True, True)], 2),
        (3, [GuestClaim(3, True, True), GuestClaim(2, True, True)], 3),  # the holder keeps it
        (3, [GuestClaim(3, False, True), GuestClaim(2, True, True)], 2),  # runs on 2 now
        (3, [GuestClaim(3, True, False), GuestClaim(2, True, True)], 2),  # 3 is offline
        (3, [GuestClaim(3, True, False), GuestClaim(2, False, False)], 3),  # all offline
        (None, [GuestClaim(4, False, True), GuestClaim(2, False, False)], 4),  # live first
    ],
)
def test_vm_host_for(current, claims, expected):
    assert vm_host_for(current, claims) == expected


# -- per-server keys: names, addresses, NICs --------------------------------------------------


def test_report_copying_another_servers_names_addresses_and_nics_changes_nothing_there():
    a, b = Agent("dgx-01"), Agent("dgx-02")
    report_a = make_report("dgx-01")
    for n, nic in enumerate(report_a["nics"]):
        nic["mac"] = f"b8:3f:d2:00:00:0{n}"
    a.send(report_a)
    before = holder_state(a.server)
    copycat = make_report("dgx-02")
    copycat["host"].update(
        {key: report_a["host"][key] for key in ("hostname", "fqdn", "machine_id", "addresses")}
    )
    copycat["nics"] = copy.deepcopy(report_a["nics"])
    _, applied = b.send(copycat)
    assert applied.status == ReportStatus.APPLIED and applied.server_id != a.server.pk
    assert holder_state(a.server) == before
    reconcile_all()
    subjects = set(
        Finding.objects.filter(type=FindingType.DUPLICATE_IDENTITY).values_list(
            "subject", flat=True
        )
    )
    assert {f"machine-id:{a.server.machine_id}", "hostname:dgx-01"} <= subjects
