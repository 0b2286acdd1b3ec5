"""Binding by declaration and its findings, on hand-built facts. No database."""

from __future__ import annotations

from clusters.choices import BindingMethod
from clusters.rules.declared import (
    clusters_by_name,
    declared_index,
    declared_node_conflict,
    declared_server,
    node_declared_twice,
)
from clusters.rules.registry import NODE_RULES, evaluate
from findings.choices import FindingType

from .fleets import fleet, node, one, server, slurm_node


def test_a_declaration_is_indexed_by_kind_and_lower_case_name():
    index = declared_index(
        [
            server(1, declared_kubernetes_node="Gpu-A", declared_slurm_node="n001"),
            server(2, declared_slurm_node="gpu-a"),
            server(3),
        ]
    )
    assert index == {
        ("kubernetes", "gpu-a"): (1,),
        ("slurm", "n001"): (1,),
        ("slurm", "gpu-a"): (2,),
    }


def test_one_server_declaring_a_name_one_cluster_holds_binds_it():
    declared = declared_index([server(7, declared_kubernetes_node="ip-10-0-0-7")])
    assert declared_server(node(1, None, name="ip-10-0-0-7"), declared, 1, ()) == 7
    assert declared_server(slurm_node(1, None, name="ip-10-0-0-7"), declared, 1, ()) is None


def test_a_name_two_servers_declare_binds_neither():
    declared = declared_index(
        [server(1, declared_slurm_node="n001"), server(2, declared_slurm_node="n001")]
    )
    assert declared_server(slurm_node(1, None, name="n001"), declared, 1, ()) is None


def test_a_name_in_two_clusters_binds_where_the_nodes_identity_agrees():
    declared = declared_index([server(7, declared_kubernetes_node="gpu1")])
    a = node(1, None, name="gpu1", cluster_id=1)
    b = node(2, None, name="gpu1", cluster_id=3, cluster="other")
    named = clusters_by_name([a, b])
    assert named["kubernetes", "gpu1"] == 2
    assert declared_server(a, declared, 2, (7,)) == 7
    assert declared_server(b, declared, 2, (9,)) is None
    assert declared_server(b, declared, 2, ()) is None


def test_two_servers_declaring_one_node_is_a_finding_naming_both():
    f = fleet(
        [
            server(1, declared_kubernetes_node="gpu-a"),
            server(2, declared_kubernetes_node="gpu-a"),
            server(3, declared_kubernetes_node="gpu-b", declared_slurm_node="gpu-a"),
        ],
        [node(1, None, name="gpu-a")],
    )
    found = one(node_declared_twice(f))
    assert found.type == FindingType.NODE_DECLARED_TWICE
    assert found.subject == "declared:kubernetes:gpu-a"
    assert found.details["servers"] == ["dgx-01", "dgx-02"]
    assert "dgx-01, dgx-02" in found.message and found.node_id == 1


def test_a_declaration_against_a_binding_by_hand_is_a_finding():
    servers = [server(1), server(2, declared_kubernetes_node="worker-1")]
    manual = node(1, 1, binding_method=BindingMethod.MANUAL)
    found = one(declared_node_conflict(fleet(servers, [manual])))
    assert found.subject == "node:1" and found.server_id == 2
    assert found.details == {"bound_to": "dgx-01", "declared_by": ["dgx-02"]}
    agreeing = [server(1, declared_kubernetes_node="worker-1")]
    assert declared_node_conflict(fleet(agreeing, [manual])) == []
    automatic = node(1, 1, binding_method=BindingMethod.DECLARED)
    assert declared_node_conflict(fleet(servers, [automatic])) == []


def test_the_conflict_is_judged_with_the_nodes_that_changed():
    servers = [server(1), server(2, declared_kubernetes_node="worker-1")]
    manual = node(1, 1, binding_method=BindingMethod.MANUAL)
    assert ("declared_node_conflict", "node:1") in evaluate(fleet(servers, [manual]), NODE_RULES)
