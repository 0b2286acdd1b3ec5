"""Identity rules on hand-built facts: no database (pytest-django refuses any query here)."""

from __future__ import annotations

from datetime import timedelta

from clusters.rules.identity import (
    ambiguous_nodes,
    duplicate_gpu,
    duplicate_identity,
    node_without_server,
    server_without_node,
)
from clusters.rules.types import ClaimedGpu
from findings.choices import FindingType, Severity

from .fleets import NOW, OFFLINE_AFTER, fleet, node, one, server, slurm_node


def test_a_gpu_node_no_server_backs_is_a_warning_naming_the_scheduler():
    found = one(node_without_server(fleet([], [node(7, server_id=None, name="worker-17")])))
    assert (found.type, found.severity, found.subject) == (
        FindingType.NODE_WITHOUT_SERVER,
        Severity.WARNING,
        "node:7",
    )
    assert found.message.startswith("worker-17 (prod): Kubernetes node with 8 GPUs and no agent")
    assert (found.node_id, found.cluster_id, found.server_id) == (7, 1, None)


def test_a_cpu_node_without_a_server_is_information_and_bound_nodes_are_not_judged():
    cpu = slurm_node(2, server_id=None, gres="")
    found = one(node_without_server(fleet([server()], [node(1), cpu])))
    assert (found.subject, found.severity) == ("node:2", Severity.INFO)
    assert "Slurm node with 0 GPUs" in found.message


def test_an_ambiguous_node_is_a_duplicate_identity_not_a_node_without_server():
    servers = [server(1, "gpu007"), server(2, "gpu007")]
    nodes = [slurm_node(5, server_id=None, name="gpu007")]
    f = fleet(servers, nodes, ambiguous={5: frozenset({1, 2})})
    assert node_without_server(f) == []
    ambiguous = [x for x in duplicate_identity(f) if x.subject == "node:5"]
    assert one(ambiguous).message.startswith(
        "gpu007 (hpc): its identity matches 2 servers (gpu007, gpu007)"
    )


def test_a_gpu_server_in_no_scheduler_once_a_cluster_exists():
    servers = [server(1), server(2), server(3, gpus=0)]
    found = one(server_without_node(fleet(servers, [node(1, server_id=1)])))
    assert (found.subject, found.server_id) == ("server:2", 2)
    assert found.message == (
        "dgx-02: 8 GPUs in no scheduler: no Kubernetes or Slurm node binds to this server"
    )
    assert server_without_node(fleet(servers, [], clusters={})) == []


def test_a_kvm_host_whose_vms_are_bound_is_in_a_scheduler():
    host = server(1, "kvm-01")
    vm = server(2, "vm-a", physical_host_id=1, is_virtual=True)
    assert server_without_node(fleet([host, vm], [node(1, server_id=2)])) == []


def test_servers_sharing_a_machine_id_or_a_short_hostname():
    servers = [
        server(1, "dgx-01", machine_id="abc"),
        server(2, "dgx-02", machine_id="abc"),
        server(3, "gpu9.a.example"),
        server(4, "gpu9.b.example"),
    ]
    by_subject = {f.subject: f for f in duplicate_identity(fleet(servers, []))}
    assert set(by_subject) == {"machine-id:abc", "hostname:gpu9"}
    assert by_subject["machine-id:abc"].details == {"servers": ["dgx-01", "dgx-02"]}
    assert by_subject["hostname:gpu9"].message == (
        "2 servers report the hostname gpu9; Slurm nodes cannot tell them apart"
    )


def test_two_nodes_of_one_cluster_on_one_server():
    nodes = [node(1, name="a"), node(2, name="b"), slurm_node(3)]
    found = one(duplicate_identity(fleet([server()], nodes)))
    assert found.subject == "cluster:1:server:1"
    assert found.message.startswith("prod: nodes a, b all bind to dgx-01;")
    assert found.details == {"nodes": ["a", "b"]}


def test_gpus_another_live_server_holds_are_named_by_serial_and_counted():
    gpus = [ClaimedGpu(holder_id=1, uuid=f"GPU-{i}", serial=f"S{i}" if i else "") for i in range(4)]
    claims = (*gpus, ClaimedGpu(holder_id=1, uuid="MIG-x", mig_device_id=9))
    servers = [server(1), server(2, gpu_claims=claims)]
    found = one(duplicate_gpu(fleet(servers, [])))
    assert (found.subject, found.server_id) == ("server:2:gpus-of:1", 2)
    assert found.message.startswith(
        "dgx-02 reports 4 GPUs and 1 MIG device that dgx-01 also reports "
        "(GPU-0, serial S1, serial S2 and 2 more); they stay with dgx-01"
    )
    assert found.details["uuids"] == ["GPU-0", "GPU-1", "GPU-2", "GPU-3", "MIG-x"]


def test_claims_on_an_offline_holder_are_no_finding():
    claims = (ClaimedGpu(holder_id=1, uuid="GPU-0"),)
    offline = server(1, last_seen=NOW - timedelta(hours=2))
    assert duplicate_gpu(fleet([offline, server(2, gpu_claims=claims)], [])) == []


def test_a_bound_node_another_live_server_claims_names_both_and_stays():
    servers = [server(1, "dgx-01"), server(2, "dgx-09")]
    nodes = [slurm_node(5, server_id=1, name="gpu-01", binding_method="hostname")]
    found = one(ambiguous_nodes(fleet(servers, nodes, ambiguous={5: frozenset({1, 2})})))
    assert (found.type, found.subject, found.server_id) == ("duplicate_identity", "node:5", 1)
    assert found.details == {"servers": [1, 2], "bound_to": 1}
    assert found.message == (
        "gpu-01 (hpc): bound to dgx-01 (server 1), whose hostname dgx-09 (server 2) also "
        "reports; the node stays on dgx-01 until a person binds it by hand or the copy stops "
        "(a copied agent token, disk image or hostname?)"
    )


def test_a_claim_by_an_offline_server_is_no_finding():
    offline = NOW - OFFLINE_AFTER - timedelta(minutes=1)
    servers = [server(1, "dgx-01"), server(2, "dgx-09", last_seen=offline)]
    nodes = [slurm_node(5, server_id=1, name="gpu-01", binding_method="hostname")]
    assert ambiguous_nodes(fleet(servers, nodes, ambiguous={5: frozenset({1, 2})})) == []
