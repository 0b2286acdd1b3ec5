"""The full pass judges only what changed since the last one (`clusters.judged`), and still
leaves exactly the findings and bindings that a pass judging everything (`force=True`) gives."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from clusters.models import Node
from clusters.reconcile import ReconcileResult, reconcile_all
from clusters.services import node_bind, snapshot_ingest
from findings.choices import Family, FindingType, family_q
from findings.models import Finding
from inventory.choices import GpuStatus
from inventory.models import Gpu, GpuClaim, HardwareProfile, MigDevice, Server
from tests.nodes import k8s_node, k8s_node_list, scontrol_node, scontrol_text
from tests.reports import address_of, apply_reports, make_report

pytestmark = pytest.mark.django_db

HOSTS = ("dgx-01", "dgx-02", "dgx-03", "dgx-04", "kvm-01")
VM = "vm-a"
VM_UUID = "22222222-2222-4222-8222-222222222221"


def state():
    """Every scheduler finding as it reads, open or resolved, and every node's binding."""
    findings = sorted(
        (
            f.type,
            f.subject,
            f.severity,
            f.message,
            f.server_id,
            f.node_id,
            f.cluster_id,
            repr(sorted(f.details.items())),
            f.resolved_at is None,
        )
        for f in Finding.objects.filter(family_q(Family.RECONCILIATION))
    )
    bindings = sorted(Node.objects.values_list("id", "server_id", "binding_method", "gone_at"))
    return findings, bindings


def open_types() -> Counter[str]:
    """The open scheduler findings, counted by type."""
    return Counter(t for t, *_, is_open in state()[0] if is_open)


def k8s_snapshot(servers, *, skip=(), **per_node):
    nodes = [
        k8s_node(h, system_uuid=servers[h].system_uuid, **per_node.get(h, {}))
        for h in ("dgx-01", "dgx-02", VM)
        if h not in skip
    ]
    nodes.append(k8s_node("ghost", system_uuid="no-such-server"))
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(*nodes))


def slurm_snapshot(*, skip=(), **per_node):
    nodes = [
        scontrol_node(h.replace("dgx", "gpu"), hostname=h, **per_node.get(h, {}))
        for h in ("dgx-02", "dgx-03", "dgx-04")
        if h not in skip
    ]
    snapshot_ingest(cluster_name="hpc", raw=scontrol_text(*nodes))


def build():
    servers = apply_reports(
        *(make_report(h) for h in HOSTS[:3]),
        make_report("dgx-04", driver="535.104.05"),
        make_report("kvm-01", gpus=1, guests=[{"uuid": VM_UUID, "name": VM}]),
        make_report(
            VM,
            gpus=2,
            system_uuid=VM_UUID,
            virtualization={"is_virtual": True, "hypervisor": "kvm"},
        ),
    )
    k8s_snapshot(servers)
    slurm_snapshot()
    return servers


def judged_like_a_forced_pass(now=None) -> ReconcileResult:
    """Reconcile, then check that judging everything finds nothing left to change."""
    result = reconcile_all(now=now)
    after = state()
    forced = reconcile_all(now=now, force=True)
    assert forced.full
    assert (forced.findings_raised, forced.findings_resolved, forced.bindings_changed) == (0, 0, 0)
    assert state() == after
    return result


def test_each_change_is_judged_as_a_pass_judging_everything_judges_it():
    servers = build()
    first = judged_like_a_forced_pass()
    assert first.full and first.bound == 6
    types = {t for t, *_ in state()[0]}
    assert {FindingType.NODE_WITHOUT_SERVER, FindingType.DRIVER_SKEW} <= types

    steady = judged_like_a_forced_pass()
    assert (steady.full, steady.judged_servers, steady.judged_nodes) == (False, 0, 0)
    assert (steady.bound, steady.findings_open) == (first.bound, first.findings_open)

    # A GPU fails: its server alone (and its nodes) is judged again.
    Gpu.objects.filter(server=servers["dgx-01"], index=2).update(status=GpuStatus.ERROR)
    result = judged_like_a_forced_pass()
    assert (result.full, result.judged_servers, result.judged_nodes) == (False, 1, 0)
    assert result.findings_raised == 1

    # Only the node side changes: Kubernetes marks GPUs unhealthy, Slurm drains a node.
    k8s_snapshot(servers, **{"dgx-02": {"allocatable": 6}})
    slurm_snapshot(**{"dgx-03": {"state": "DRAIN", "reason": "bad_fan"}})
    result = judged_like_a_forced_pass()
    assert (result.full, result.judged_nodes) == (False, 2)
    assert result.findings_raised == 2

    # Another driver: the cluster's skew changes.
    Server.objects.filter(id=servers["dgx-03"].id).update(driver_version="535.104.05")
    assert not judged_like_a_forced_pass().full

    # A MIG device appears that Slurm's GRES does not offer.
    gpu = Gpu.objects.get(server=servers["dgx-03"], index=1)
    MigDevice.objects.create(
        gpu=gpu, uuid="MIG-1", gpu_instance_id=1, compute_instance_id=0, profile="1g.10gb"
    )
    result = judged_like_a_forced_pass()
    assert not result.full and result.findings_raised == 1

    # A node is bound by hand elsewhere, then goes from its scheduler's snapshot.
    node_bind(node=Node.objects.get(name="gpu-04"), server=servers["dgx-01"])
    result = judged_like_a_forced_pass()
    assert not result.full and result.judged_nodes == 1
    slurm_snapshot(skip=("dgx-04",), **{"dgx-03": {"state": "DRAIN", "reason": "bad_fan"}})
    result = judged_like_a_forced_pass()
    assert not result.full and result.judged_nodes == 1

    # The VM leaves its host: the host is in no scheduler any more. Then the VM's node goes.
    Server.objects.filter(hostname=VM).update(physical_host=None)
    result = judged_like_a_forced_pass()
    assert not result.full and result.findings_raised == 1
    k8s_snapshot(servers, skip=(VM,))
    assert not judged_like_a_forced_pass().full

    # An address duplicated: dgx-04 takes dgx-03's (addresses are identity: all is judged).
    Server.objects.filter(id=servers["dgx-04"].id).update(
        addresses=[address_of("dgx-04"), address_of("dgx-03")]
    )
    assert judged_like_a_forced_pass().full
    assert open_types()[FindingType.IP_ADDRESS_DUPLICATE] == 1

    # Two servers racked apart, then one moved into the other's units (DGX H100s: 8U each).
    Server.objects.filter(id=servers["dgx-01"].id).update(rack="R1", rack_position=1)
    Server.objects.filter(id=servers["dgx-02"].id).update(rack="R1", rack_position=9)
    result = judged_like_a_forced_pass()
    assert not result.full and FindingType.RACK_UNITS_OVERLAP not in open_types()
    Server.objects.filter(id=servers["dgx-02"].id).update(rack_position=4)
    result = judged_like_a_forced_pass()
    assert not result.full and result.findings_raised == 1
    assert open_types()[FindingType.RACK_UNITS_OVERLAP] == 1

    # The duplicate goes offline: its address no longer counts.
    gone = timezone.now() - timedelta(seconds=settings.ATLAS_SERVER_OFFLINE_AFTER_S + 60)
    Server.objects.filter(id=servers["dgx-04"].id).update(last_seen=gone)
    result = judged_like_a_forced_pass()
    assert not result.full and FindingType.IP_ADDRESS_DUPLICATE not in open_types()

    # A server claims a GPU another holds; then the holder stops reporting.
    held = Gpu.objects.get(server=servers["dgx-02"], index=0)
    GpuClaim.objects.create(server=servers["dgx-03"], gpu=held, uuid=held.uuid)
    result = judged_like_a_forced_pass()
    assert not result.full and result.findings_raised == 1
    later = timezone.now() + timedelta(seconds=settings.ATLAS_SERVER_OFFLINE_AFTER_S + 60)
    Server.objects.exclude(id=servers["dgx-02"].id).update(last_seen=later)
    result = judged_like_a_forced_pass(now=later)
    assert not result.full
    assert result.findings_resolved >= 1  # the claim: its holder is offline
    assert any(t == FindingType.STALE_AGENT for t, *_ in state()[0])
    assert open_types()[FindingType.IP_ADDRESS_DUPLICATE] == 1  # dgx-04 reports again

    # A hostname changes: any node may bind elsewhere, so everything is judged.
    Server.objects.filter(id=servers["dgx-03"].id).update(hostname="dgx-33")
    result = judged_like_a_forced_pass(now=later)
    assert result.full

    # A server is deleted; a hardware profile appears.
    Server.objects.filter(id=servers["dgx-01"].id).delete()
    assert judged_like_a_forced_pass(now=later).full
    HardwareProfile.objects.create(name="dgx-h100", vendor="", product="", expected_gpu_count=8)
    assert judged_like_a_forced_pass(now=later).full
    assert judged_like_a_forced_pass(now=later).full is False


def test_a_change_the_pass_did_not_judge_waits_for_the_next_one(monkeypatch):
    """A GPU of dgx-03 fails while a pass judges dgx-02's change: after the pass read what
    changed, before it loaded the facts. That pass must not record dgx-03 as judged."""
    from clusters import reconcile

    servers = build()
    reconcile_all()
    Gpu.objects.filter(server=servers["dgx-02"], index=0).update(remapped_rows_failure=True)
    loading = reconcile._load_servers

    def meanwhile(*args, **kwargs):
        Gpu.objects.filter(server=servers["dgx-03"], index=0).update(remapped_rows_failure=True)
        return loading(*args, **kwargs)

    monkeypatch.setattr(reconcile, "_load_servers", meanwhile)
    assert reconcile_all().judged_servers == 1  # dgx-02
    monkeypatch.setattr(reconcile, "_load_servers", loading)
    assert not Finding.objects.filter(server=servers["dgx-03"], resolved_at__isnull=True).exists()
    assert reconcile_all().judged_servers == 1  # dgx-03, the pass after
    assert Finding.objects.filter(server=servers["dgx-03"], resolved_at__isnull=True).exists()
    assert reconcile_all().judged_servers == 0  # judged once, then at rest
