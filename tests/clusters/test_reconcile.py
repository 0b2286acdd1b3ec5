"""Reconciliation, case by case: bindings, findings raised, resolved and reopened."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.choices import BindingMethod
from clusters.models import Node
from clusters.reconcile import reconcile_all
from clusters.services import node_bind, snapshot_ingest
from findings.choices import FindingType
from findings.models import Finding
from inventory.models import HardwareProfile, Server
from inventory.services import report_apply, report_receive
from tests.nodes import k8s_node, k8s_node_list, scontrol_node, scontrol_text
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


load = apply_reports


def open_findings(type_=None):
    qs = Finding.objects.filter(resolved_at__isnull=True)
    return list(qs.filter(type=type_) if type_ else qs)


def test_kubernetes_node_binds_by_system_uuid_case_insensitively():
    servers = load(make_report("dgx-01"))
    uuid = servers["dgx-01"].system_uuid
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(k8s_node("worker-17", system_uuid=uuid)))
    reconcile_all()
    node = Node.objects.get()
    assert node.server == servers["dgx-01"]
    assert node.binding_method == BindingMethod.SYSTEM_UUID
    assert open_findings() == []


def test_kubernetes_falls_back_to_machine_id_then_name():
    servers = load(make_report("dgx-01"), make_report("dgx-02"))
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(
            k8s_node("a", machine_id=servers["dgx-01"].machine_id),
            k8s_node("dgx-02.cluster.example"),
        ),
    )
    reconcile_all()
    a, b = Node.objects.order_by("name")
    assert (a.server.hostname, a.binding_method) == ("dgx-01", BindingMethod.MACHINE_ID)
    assert (b.server.hostname, b.binding_method) == ("dgx-02", BindingMethod.FQDN)


def test_slurm_short_hostname_binds_to_an_fqdn_server():
    load(make_report("gpu007", fqdn="gpu007.hpc.example.org"))
    snapshot_ingest(cluster_name="hpc", raw=scontrol_node("gpu007"))
    reconcile_all()
    node = Node.objects.get()
    assert node.server.hostname == "gpu007"
    assert node.binding_method == BindingMethod.HOSTNAME


def test_slurm_node_address_binds_to_a_server_address():
    load(make_report("box-a", addresses=["10.1.2.3"]))
    snapshot_ingest(cluster_name="hpc", raw=scontrol_node("n001", hostname="n001", addr="10.1.2.3"))
    reconcile_all()
    assert Node.objects.get().binding_method == BindingMethod.ADDRESS


def test_two_vm_nodes_on_one_physical_server():
    host_uuid = "11111111-1111-4111-8111-111111111111"
    vm_uuids = ["22222222-2222-4222-8222-222222222221", "22222222-2222-4222-8222-222222222222"]
    servers = load(
        make_report(
            "kvm-01",
            gpus=0,
            system_uuid=host_uuid,
            guests=[{"uuid": u, "name": f"vm{i}"} for i, u in enumerate(vm_uuids)],
        ),
        *(
            make_report(
                f"vm{i}",
                gpus=4,
                system_uuid=u,
                virtualization={"is_virtual": True, "hypervisor": "kvm"},
            )
            for i, u in enumerate(vm_uuids)
        ),
    )
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(
            *(k8s_node(f"vm{i}", system_uuid=u, gpus=4) for i, u in enumerate(vm_uuids))
        ),
    )
    reconcile_all()
    bound = {n.name: n.server for n in Node.objects.all()}
    assert bound["vm0"].physical_host == servers["kvm-01"]
    assert bound["vm1"].physical_host == servers["kvm-01"]
    assert open_findings() == []  # the host's GPUs are its VMs', it is not "in no scheduler"


def test_node_without_agent_and_server_in_no_scheduler():
    load(make_report("dgx-01"), make_report("login-01", gpus=0))
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(k8s_node("ghost", system_uuid="abc")))
    reconcile_all()
    (orphan,) = open_findings(FindingType.NODE_WITHOUT_SERVER)
    assert orphan.node.name == "ghost" and "no agent report" in orphan.message
    (idle,) = open_findings(FindingType.SERVER_WITHOUT_NODE)
    assert idle.server.hostname == "dgx-01"  # the CPU-only login node is not flagged


def test_device_plugin_marking_gpus_unhealthy_is_a_count_mismatch():
    servers = load(make_report("gpu-node-1"))
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(
            k8s_node(
                "gpu-node-1", system_uuid=servers["gpu-node-1"].system_uuid, gpus=8, allocatable=7
            )
        ),
    )
    reconcile_all()
    (finding,) = open_findings(FindingType.GPU_COUNT_MISMATCH)
    assert "only 7 allocatable" in finding.message and "marked 1 unhealthy" in finding.message


def test_server_that_lost_a_gpu_is_a_count_mismatch_and_unhealthy():
    servers = load(make_report("gpu-b02", skip_gpus=()))
    uuid = servers["gpu-b02"].system_uuid
    token = servers["gpu-b02"].agent_tokens.get()
    result = report_receive(
        token=token, body=json.dumps(make_report("gpu-b02", skip_gpus=(3,))).encode()
    )
    report_apply(report_id=result.report_id)
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(k8s_node("gpu-b02", system_uuid=uuid)))
    reconcile_all()
    (count,) = open_findings(FindingType.GPU_COUNT_MISMATCH)
    assert "advertises 8" in count.message and "server has 7" in count.message
    (unhealthy,) = open_findings(FindingType.UNHEALTHY_GPU)
    assert unhealthy.severity == "critical" and "1 GPU(s) lost" in unhealthy.message


def test_time_slicing_replicas_are_not_a_mismatch():
    servers = load(make_report("ts-01"))
    node = k8s_node(
        "ts-01",
        system_uuid=servers["ts-01"].system_uuid,
        gpus=32,
        labels={
            "nvidia.com/gpu.replicas": "4",
            "nvidia.com/gpu.sharing-strategy": "time-slicing",
            "nvidia.com/gpu.count": "8",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED",
        },
    )
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(node))
    reconcile_all()
    assert open_findings() == []


def test_mig_mixed_strategy_counted_right():
    report = make_report("a100-01", model="NVIDIA A100-SXM4-80GB", mig_gpus={0: ["1g.10gb"] * 7})
    servers = load(report)
    node = k8s_node(
        "a100-01",
        system_uuid=servers["a100-01"].system_uuid,
        gpus=7,
        labels={
            "nvidia.com/mig.strategy": "mixed",
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        },
        extra_resources={"nvidia.com/mig-1g.10gb": 7},
    )
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(node))
    reconcile_all()
    assert open_findings() == []


def test_mig_mismatch_when_the_scheduler_offers_another_layout():
    servers = load(make_report("a100-01", mig_gpus={0: ["3g.40gb", "3g.40gb"]}))
    node = k8s_node(
        "a100-01",
        system_uuid=servers["a100-01"].system_uuid,
        gpus=7,
        labels={"nvidia.com/mig.strategy": "mixed"},
        extra_resources={"nvidia.com/mig-1g.10gb": 7},
    )
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(node))
    reconcile_all()
    (finding,) = open_findings(FindingType.MIG_MISMATCH)
    assert "7x 1g.10gb" in finding.message and "2x 3g.40gb" in finding.message


def test_slurm_mig_gres_counted_right_and_whole_count_mismatch():
    load(
        make_report(
            "tux1", model="NVIDIA A100-SXM4-40GB", gpus=2, mig_gpus={1: ["3g.20gb", "3g.20gb"]}
        ),
        make_report("tux2", model="NVIDIA A100-SXM4-40GB", gpus=8),
    )
    snapshot_ingest(
        cluster_name="hpc",
        raw=scontrol_text(
            scontrol_node("tux1", gres="gpu:a100:1,gpu:a100_3g.20gb:2"),
            scontrol_node("tux2", gres="gpu:a100:4"),
        ),
    )
    reconcile_all()
    findings = open_findings()
    assert [(f.type, f.node.name) for f in findings] == [(FindingType.GPU_COUNT_MISMATCH, "tux2")]
    assert "Slurm's Gres says 4 GPUs" in findings[0].message


def test_gpu_model_mismatch_between_gfd_label_and_agent():
    servers = load(make_report("dgx-01"))
    node = k8s_node(
        "dgx-01",
        system_uuid=servers["dgx-01"].system_uuid,
        labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
    )
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(node))
    reconcile_all()
    (finding,) = open_findings(FindingType.GPU_MODEL_MISMATCH)
    assert "A100" in finding.message and "H100" in finding.message


def test_stale_agent_on_a_ready_node():
    servers = load(make_report("dgx-01"))
    Server.objects.update(last_seen=timezone.now() - timedelta(hours=3))
    snapshot_ingest(cluster_name="hpc", raw=scontrol_node("dgx-01"))
    reconcile_all()
    (finding,) = open_findings(FindingType.STALE_AGENT)
    assert finding.server == servers["dgx-01"]


def test_drained_node_with_healthy_hardware_is_information():
    load(make_report("dgx-01"))
    snapshot_ingest(
        cluster_name="hpc", raw=scontrol_node("dgx-01", state="IDLE+DRAIN", reason="maintenance")
    )
    reconcile_all()
    (finding,) = open_findings(FindingType.NODE_UNAVAILABLE)
    assert finding.severity == "info" and "maintenance" in finding.message


def test_driver_skew_within_a_cluster():
    load(make_report("a"), make_report("b", driver="535.161.08"))
    snapshot_ingest(cluster_name="hpc", raw=scontrol_text(scontrol_node("a"), scontrol_node("b")))
    reconcile_all()
    (finding,) = open_findings(FindingType.DRIVER_SKEW)
    assert "550.54.15" in finding.message and "535.161.08" in finding.message


def test_gpu_fallen_off_the_bus_and_below_profile():
    HardwareProfile.objects.create(
        name="DGX H100",
        vendor="NVIDIA",
        product="DGXH100",
        expected_gpu_count=8,
        expected_gpu_model="H100",
    )
    report = make_report("dgx-09", skip_gpus=(5,))
    report["pci_gpus"].append({"pci_bus_id": "0000:68:00.0", "driver": "nvidia", "in_nvml": False})
    servers = load(report)
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(k8s_node("dgx-09", system_uuid=servers["dgx-09"].system_uuid, gpus=7)),
    )
    reconcile_all()
    (bus,) = open_findings(FindingType.GPU_NOT_IN_NVML)
    assert bus.severity == "critical" and "8 GPUs on the PCI bus, NVML sees 7" in bus.message
    (profile,) = open_findings(FindingType.BELOW_PROFILE)
    assert "expects 8 GPUs" in profile.message and "fell off the bus" in profile.message


def test_manual_binding_wins_and_survives_reconciliation():
    servers = load(make_report("dgx-01"), make_report("dgx-02"))
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(k8s_node("odd-name", system_uuid=servers["dgx-01"].system_uuid)),
    )
    reconcile_all()
    node = Node.objects.get()
    node_bind(node=node, server=servers["dgx-02"])
    reconcile_all()
    node.refresh_from_db()
    assert node.server == servers["dgx-02"] and node.binding_method == BindingMethod.MANUAL
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(k8s_node("odd-name", system_uuid=servers["dgx-01"].system_uuid)),
    )
    reconcile_all()
    node.refresh_from_db()
    assert node.server == servers["dgx-02"]


def test_a_finding_resolves_when_the_cause_is_gone_and_reopens_when_it_returns():
    servers = load(make_report("dgx-01"))
    uuid = servers["dgx-01"].system_uuid
    snapshot_ingest(
        cluster_name="prod", raw=k8s_node_list(k8s_node("n", system_uuid=uuid, allocatable=6))
    )
    reconcile_all()
    (finding,) = open_findings(FindingType.GPU_COUNT_MISMATCH)
    first_seen = finding.first_seen
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(k8s_node("n", system_uuid=uuid)))
    reconcile_all()
    finding.refresh_from_db()
    assert finding.resolved_at is not None
    snapshot_ingest(
        cluster_name="prod", raw=k8s_node_list(k8s_node("n", system_uuid=uuid, allocatable=6))
    )
    reconcile_all()
    finding.refresh_from_db()
    assert finding.resolved_at is None and finding.reopened_count == 1
    assert finding.first_seen == first_seen
    assert Finding.objects.count() == 1


def test_gone_nodes_are_marked_not_deleted_and_their_findings_resolve():
    three = k8s_node_list(k8s_node("a"), k8s_node("b"), k8s_node("c"))
    snapshot_ingest(cluster_name="prod", raw=three)
    reconcile_all()
    assert len(open_findings(FindingType.NODE_WITHOUT_SERVER)) == 3
    result = snapshot_ingest(cluster_name="prod", raw=k8s_node_list(k8s_node("a"), k8s_node("c")))
    assert result.gone == 1
    reconcile_all()
    assert Node.objects.get(name="b").gone_at is not None
    assert sorted(f.node.name for f in open_findings()) == ["a", "c"]


def test_reconcile_costs_the_same_queries_for_5_and_40_servers():
    def run(count, offset):
        reports = [make_report(f"dgx-{offset + i:03d}", gpus=2, nics=0) for i in range(count)]
        load(*reports)
        nodes = [
            k8s_node(r["host"]["hostname"], system_uuid=r["host"]["system_uuid"], gpus=2)
            for r in reports
        ]
        snapshot_ingest(cluster_name=f"c{offset}", raw=k8s_node_list(*nodes))
        with CaptureQueriesContext(connection) as ctx:
            reconcile_all()
        return len(ctx.captured_queries)

    reconcile_all()  # the first run creates its state row
    assert run(5, 0) == run(40, 100)
