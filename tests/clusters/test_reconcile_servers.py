"""Reconciling a few servers after a report: their findings and their nodes', nothing else."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.reconcile import reconcile_all, reconcile_servers
from clusters.services import snapshot_ingest
from findings.choices import FindingType
from findings.models import Finding
from inventory.choices import GpuStatus
from inventory.models import Gpu
from inventory.services import report_apply, report_receive
from tests.nodes import k8s_node, k8s_node_list
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


def open_findings():
    return sorted(
        (f.type, f.server.hostname if f.server else None, f.message)
        for f in Finding.objects.filter(resolved_at__isnull=True).select_related("server")
    )


def fleet(*hostnames, cluster="prod", **report):
    servers = apply_reports(*(make_report(h, **report) for h in hostnames))
    nodes = [k8s_node(h, system_uuid=servers[h].system_uuid) for h in hostnames]
    snapshot_ingest(cluster_name=cluster, raw=k8s_node_list(*nodes))
    reconcile_all()
    return servers


def lose_gpu(server, index=3):
    """The server's next report lacks GPU `index`."""
    token = server.agent_tokens.get()
    report = make_report(server.hostname, skip_gpus=(index,))
    report_apply(report_id=report_receive(token=token, body=json.dumps(report).encode()).report_id)


def test_a_changed_server_is_judged_and_the_others_wait_for_the_full_pass():
    servers = fleet("dgx-01", "dgx-02")
    assert open_findings() == []
    lose_gpu(servers["dgx-01"])
    Gpu.objects.filter(server=servers["dgx-02"], index=0).update(ecc_errors_uncorrected=3)

    result = reconcile_servers(server_ids=[servers["dgx-01"].id])
    assert (result.servers, result.nodes, result.findings_raised) == (1, 1, 2)
    assert [(t, h) for t, h, _ in open_findings()] == [
        (FindingType.GPU_COUNT_MISMATCH, "dgx-01"),
        (FindingType.UNHEALTHY_GPU, "dgx-01"),
    ]
    reconcile_all()
    assert (FindingType.UNHEALTHY_GPU, "dgx-02") in [(t, h) for t, h, _ in open_findings()]


def test_it_resolves_its_servers_findings_and_leaves_fleet_findings_alone():
    servers = fleet("dgx-01", "dgx-02")
    apply_reports(make_report("spare-01"))  # in no scheduler
    Gpu.objects.filter(server=servers["dgx-01"], index=0).update(status=GpuStatus.ERROR)
    reconcile_all()
    before = open_findings()
    assert {t for t, _, _ in before} == {FindingType.UNHEALTHY_GPU, FindingType.SERVER_WITHOUT_NODE}

    Gpu.objects.filter(server=servers["dgx-01"], index=0).update(status=GpuStatus.OK)
    Gpu.objects.filter(server=servers["dgx-02"], index=0).update(status=GpuStatus.ERROR)
    result = reconcile_servers(server_ids=[servers["dgx-01"].id])
    assert (result.findings_raised, result.findings_resolved) == (0, 1)
    assert [(t, h) for t, h, _ in open_findings()] == [
        (FindingType.SERVER_WITHOUT_NODE, "spare-01")
    ]


def test_after_it_the_full_pass_finds_nothing_left_to_change():
    servers = fleet("dgx-01", "dgx-02", "dgx-03")
    lose_gpu(servers["dgx-02"], index=5)
    Gpu.objects.filter(server=servers["dgx-02"], index=1).update(remapped_rows_pending=True)
    reconcile_servers(server_ids=[servers["dgx-02"].id])
    incremental = open_findings()
    assert len(incremental) == 2
    full = reconcile_all()
    assert (full.findings_raised, full.findings_resolved) == (0, 0)
    assert open_findings() == incremental


def test_a_vm_keeps_its_host_in_a_scheduler():
    host_uuid = "11111111-1111-4111-8111-111111111111"
    vm_uuid = "22222222-2222-4222-8222-222222222221"
    servers = apply_reports(
        make_report("kvm-01", system_uuid=host_uuid, gpus=2, guests=[{"uuid": vm_uuid}]),
        make_report(
            "vm-a",
            system_uuid=vm_uuid,
            gpus=2,
            virtualization={"is_virtual": True, "hypervisor": "kvm"},
        ),
    )
    node = k8s_node("vm-a", system_uuid=vm_uuid, gpus=2)
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(node))
    reconcile_all()
    assert open_findings() == []
    reconcile_servers(server_ids=[servers["vm-a"].id])
    reconcile_servers(server_ids=[servers["kvm-01"].id])
    assert open_findings() == []


def test_it_costs_the_same_queries_for_5_and_40_servers():
    def run(count, offset):
        names = [f"dgx-{offset + i:03d}" for i in range(count)]
        servers = fleet(*names, cluster=f"c{offset}", gpus=2, nics=0)
        Gpu.objects.filter(server=servers[names[0]], index=0).update(status=GpuStatus.ERROR)
        with CaptureQueriesContext(connection) as ctx:
            reconcile_servers(server_ids=[servers[names[0]].id, servers[names[1]].id])
        return len(ctx.captured_queries)

    assert run(5, 0) == run(40, 100)


def test_a_gpu_claimed_from_another_server_is_judged_with_the_holder_read():
    holder = make_report("dgx-01")
    claimant = make_report("dgx-02")
    claimant["gpus"][7].update(uuid=holder["gpus"][7]["uuid"], serial=holder["gpus"][7]["serial"])
    servers = apply_reports(holder, claimant)
    reconcile_servers(server_ids=[servers["dgx-02"].id])
    (finding,) = Finding.objects.filter(type=FindingType.DUPLICATE_GPU)
    assert finding.server == servers["dgx-02"]
    assert finding.message.startswith("dgx-02 reports 1 GPU that dgx-01 also reports")
