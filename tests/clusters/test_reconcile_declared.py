"""Binding by the node an agent declares: Kubernetes and Slurm nodes whose names match no
hostname, address, UUID or machine-id of any server bind to the servers declaring them."""

from __future__ import annotations

import json

import pytest

from clusters.choices import BindingMethod
from clusters.models import Node
from clusters.reconcile import reconcile_all
from clusters.services import node_bind, snapshot_ingest
from findings.choices import FindingType
from findings.models import Finding
from inventory.models import AgentToken, Server
from inventory.services import report_apply, report_receive
from tests.nodes import k8s_node, k8s_node_list, scontrol_node, scontrol_text
from tests.reports import apply_reports, make_report

from .test_reconcile_changes import judged_like_a_forced_pass

pytestmark = pytest.mark.django_db

K8S = ("ip-172-31-4-17.ec2.internal", "ip-172-31-4-18.ec2.internal")
SLURM = ("n0417", "n0418")


def declaring(hostname: str, k8s: str | None = None, slurm: str | None = None) -> dict:
    host = {}
    if k8s:
        host["kubernetes_node_name"] = k8s
    if slurm:
        host["slurm_node_name"] = slurm
    return make_report(hostname, **host)


def report_again(*reports: dict) -> None:
    """The servers' next reports, sent with the tokens their first ones bound."""
    for report in reports:
        server = Server.objects.get(hostname=report["host"]["hostname"])
        token = AgentToken.objects.get(identity=server.identity)
        result = report_receive(token=token, body=json.dumps(report).encode())
        if result.status == "pending":
            report_apply(report_id=result.report_id)


def snapshots(*, k8s=K8S, slurm=SLURM, cluster: str = "prod") -> None:
    # Nodes known by their cloud and rack names only: no server's name, address or UUID.
    if k8s:
        nodes = (k8s_node(n, address="192.0.2.9") for n in k8s)
        snapshot_ingest(cluster_name=cluster, raw=k8s_node_list(*nodes))
    if slurm:
        snapshot_ingest(cluster_name="hpc", raw=scontrol_text(*(scontrol_node(n) for n in slurm)))


def bindings() -> dict[tuple[str, str], tuple[str | None, str]]:
    return {
        (n.cluster.name, n.name): (n.server.hostname if n.server else None, n.binding_method)
        for n in Node.objects.select_related("cluster", "server")
    }


def open_findings(type_: str) -> list[Finding]:
    return list(Finding.objects.filter(type=type_, resolved_at__isnull=True))


def test_nodes_named_like_no_server_bind_to_the_servers_declaring_them():
    apply_reports(
        declaring("dgx-01", K8S[0], SLURM[0]),
        declaring("dgx-02", K8S[1], SLURM[1]),
    )
    snapshots()
    result = judged_like_a_forced_pass()
    assert result.bound == 4
    assert bindings() == {
        ("prod", K8S[0]): ("dgx-01", BindingMethod.DECLARED),
        ("prod", K8S[1]): ("dgx-02", BindingMethod.DECLARED),
        ("hpc", SLURM[0]): ("dgx-01", BindingMethod.DECLARED),
        ("hpc", SLURM[1]): ("dgx-02", BindingMethod.DECLARED),
    }
    assert Node.objects.get(name=SLURM[0]).get_binding_method_display() == "declared by the agent"
    assert not open_findings(FindingType.NODE_WITHOUT_SERVER)


def test_without_declarations_the_same_nodes_bind_to_nothing():
    apply_reports(make_report("dgx-01"), make_report("dgx-02"))
    snapshots()
    assert reconcile_all().bound == 0
    assert len(open_findings(FindingType.NODE_WITHOUT_SERVER)) == 4


def test_a_name_two_servers_declare_binds_neither_and_names_both():
    apply_reports(
        declaring("dgx-01", K8S[0], SLURM[0]),
        declaring("dgx-02", K8S[0], SLURM[1]),
    )
    snapshots()
    judged_like_a_forced_pass()
    found = bindings()
    assert found["prod", K8S[0]] == (None, BindingMethod.NONE)
    assert found["hpc", SLURM[0]] == ("dgx-01", BindingMethod.DECLARED)
    (twice,) = open_findings(FindingType.NODE_DECLARED_TWICE)
    assert twice.details["servers"] == ["dgx-01", "dgx-02"]
    assert twice.node_id == Node.objects.get(name=K8S[0]).id

    # One agent fixed: the other binds, the finding resolves.
    report_again(declaring("dgx-02", K8S[1], SLURM[1]))
    judged_like_a_forced_pass()
    assert bindings()["prod", K8S[0]] == ("dgx-01", BindingMethod.DECLARED)
    assert not open_findings(FindingType.NODE_DECLARED_TWICE)


def test_a_binding_by_hand_wins_and_a_contradicting_declaration_is_a_finding():
    servers = apply_reports(declaring("dgx-01", K8S[0]), declaring("dgx-02"))
    snapshots(slurm=())
    judged_like_a_forced_pass()
    node = Node.objects.get(name=K8S[0])
    node_bind(node=node, server=servers["dgx-02"])
    assert not judged_like_a_forced_pass().full
    assert bindings()["prod", K8S[0]] == ("dgx-02", BindingMethod.MANUAL)
    (conflict,) = open_findings(FindingType.DECLARED_NODE_CONFLICT)
    assert conflict.node_id == node.id and conflict.server_id == servers["dgx-01"].id
    assert conflict.details == {"bound_to": "dgx-02", "declared_by": ["dgx-01"]}

    node_bind(node=Node.objects.get(name=K8S[0]), server=None)
    judged_like_a_forced_pass()
    assert bindings()["prod", K8S[0]] == ("dgx-01", BindingMethod.DECLARED)
    assert not open_findings(FindingType.DECLARED_NODE_CONFLICT)


def test_a_server_that_stops_declaring_falls_back_to_the_other_methods():
    apply_reports(declaring("dgx-01", "dgx-01-k8s"), declaring("dgx-02", K8S[1]))
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(
            k8s_node("dgx-01-k8s", system_uuid=Server.objects.get(hostname="dgx-01").system_uuid),
            k8s_node(K8S[1], address="192.0.2.9"),
        ),
    )
    judged_like_a_forced_pass()
    assert bindings()["prod", "dgx-01-k8s"] == ("dgx-01", BindingMethod.DECLARED)

    report_again(make_report("dgx-01"), make_report("dgx-02"))
    assert Server.objects.get(hostname="dgx-01").declared_kubernetes_node == ""
    judged_like_a_forced_pass()
    assert bindings() == {
        ("prod", "dgx-01-k8s"): ("dgx-01", BindingMethod.SYSTEM_UUID),
        ("prod", K8S[1]): (None, BindingMethod.NONE),
    }


def test_a_partial_report_keeps_the_last_declarations():
    apply_reports(declaring("dgx-01", K8S[0], SLURM[0]))
    partial = make_report("dgx-01", gpus=1)
    partial.update(partial=True, partial_reason="nvidia-smi -L")
    report_again(partial)
    server = Server.objects.get(hostname="dgx-01")
    assert (server.declared_kubernetes_node, server.declared_slurm_node) == (K8S[0], SLURM[0])


def test_a_name_in_two_clusters_binds_only_where_the_nodes_identity_agrees():
    servers = apply_reports(declaring("dgx-01", "gpu1"))
    uuid = servers["dgx-01"].system_uuid
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(k8s_node("gpu1", system_uuid=uuid)))
    snapshot_ingest(cluster_name="lab", raw=k8s_node_list(k8s_node("gpu1", address="192.0.2.9")))
    judged_like_a_forced_pass()
    assert bindings() == {
        ("prod", "gpu1"): ("dgx-01", BindingMethod.DECLARED),
        ("lab", "gpu1"): (None, BindingMethod.NONE),
    }


def test_a_declared_node_arriving_later_is_bound_by_the_incremental_pass_as_by_a_full_one():
    apply_reports(declaring("dgx-01", K8S[0]), make_report("dgx-02"))
    snapshots(k8s=(K8S[1],))
    lab = (k8s_node("lab-1", address="192.0.2.10"),)
    snapshot_ingest(cluster_name="lab", raw=k8s_node_list(*lab))
    judged_like_a_forced_pass()
    snapshots(k8s=K8S, slurm=())
    assert not judged_like_a_forced_pass().full
    assert bindings()["prod", K8S[0]] == ("dgx-01", BindingMethod.DECLARED)
    # The node changes: judged alone, still bound as declared.
    nodes = k8s_node(K8S[0], address="192.0.2.9", allocatable=6)
    snapshot_ingest(
        cluster_name="prod", raw=k8s_node_list(nodes, k8s_node(K8S[1], address="192.0.2.9"))
    )
    result = judged_like_a_forced_pass()
    assert (result.full, result.judged_nodes) == (False, 1)
    assert bindings()["prod", K8S[0]] == ("dgx-01", BindingMethod.DECLARED)
    # The same name in a second cluster, whose node matches nothing: neither cluster's
    # declaration is certain, and the first node has no other identity: both unbound.
    twin = k8s_node(K8S[0], address="192.0.2.9")
    snapshot_ingest(cluster_name="lab", raw=k8s_node_list(*lab, twin))
    assert judged_like_a_forced_pass().full  # the other cluster's node may bind otherwise now
    assert bindings()["prod", K8S[0]] == (None, BindingMethod.NONE)
    assert bindings()["lab", K8S[0]] == (None, BindingMethod.NONE)


def test_the_node_page_and_api_say_the_node_was_declared_by_the_agent(client, user):
    apply_reports(declaring("dgx-01", K8S[0]))
    snapshots(k8s=(K8S[0],), slurm=())
    reconcile_all()
    node = Node.objects.get(name=K8S[0])
    client.force_login(user)
    assert "declared by the agent" in client.get(f"/nodes/{node.pk}/").content.decode()
    (listed,) = client.get("/api/v1/nodes/?cluster=prod").json()["results"]
    assert listed["binding_method"] == BindingMethod.DECLARED
