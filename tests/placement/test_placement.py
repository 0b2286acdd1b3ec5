"""Placement on hand-built fleets with known answers."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from inventory.models import Gpu
from placement.capacity import CapacityRequestError, capacity_compare
from placement.selectors import fleet_counts, fleet_load, placement_choices
from placement.service import placement_find
from placement.summaries import placement_summaries_refresh
from placement.types import PlacementRequestError, gpu_memory_text
from tests.nodes import k8s_node, k8s_node_list, scontrol_node, scontrol_text
from tests.reports import apply_reports, make_report

from .fleets import k8s_fleet, pcie_report, pods, slurm_fleet

pytestmark = pytest.mark.django_db


def names(result) -> list[str]:
    return [n.node for n in result.nodes]


def indexes(node) -> list[int]:
    return [g.index for g in node.gpus]


# Slurm ----------------------------------------------------------------------------------


def test_16_gpus_on_ten_8_gpu_slurm_nodes_is_2_nodes_of_8():
    slurm_fleet([f"gpu{i:03d}" for i in range(10)])
    result = placement_find(cluster="hpc", gpus=16)
    assert result.fits and result.kind == "slurm"
    assert result.total_gpus == 16
    assert [n.gpu_count for n in result.nodes] == [8, 8]
    assert all(n.link_class == "NV18" and len(n.gpus) == 8 for n in result.nodes)
    assert result.clusters[0].request == "16 GPUs over as few nodes as possible"


def test_12_gpus_take_one_full_node_and_the_tightest_fit_for_the_rest():
    slurm_fleet([f"gpu{i:03d}" for i in range(3)])
    snapshot_ingest(
        cluster_name="hpc",
        raw=scontrol_text(
            scontrol_node("gpu000"),
            scontrol_node("gpu001"),
            scontrol_node("gpu002").replace(
                "   Gres=", "   GresUsed=gpu:h100:4(IDX:0-3)\n   Gres="
            ),
        ),
    )
    result = placement_find(cluster="hpc", gpus=12)
    assert result.total_gpus == 12
    assert [(n.node, n.gpu_count) for n in result.nodes] == [("gpu000", 8), ("gpu002", 4)]
    busy_node = result.nodes[1]
    assert indexes(busy_node) == [4, 5, 6, 7]  # GresUsed IDX 0-3 are taken
    assert busy_node.in_use_known


def test_slurm_nodes_times_gpus_per_node():
    slurm_fleet([f"gpu{i:03d}" for i in range(4)])
    result = placement_find(cluster="hpc", nodes=3, gpus_per_node=4)
    assert result.fits and result.total_gpus == 12
    assert len(result.nodes) == 3 and {n.gpu_count for n in result.nodes} == {4}
    assert len({n.node for n in result.nodes}) == 3
    assert all(len(set(n.numa_nodes)) == 1 for n in result.nodes)  # 4 on one socket


def test_spread_that_needs_more_than_is_free_says_how_much_is_free():
    slurm_fleet(["gpu000", "gpu001"])
    result = placement_find(cluster="hpc", gpus=24)
    assert not result.fits and result.total_gpus == 0
    assert "needs 24 free GPUs; 16 free on 2 eligible node(s)" in result.reason


# Kubernetes -----------------------------------------------------------------------------


def test_kubernetes_pod_of_4_on_an_nvlink_server_picks_4_nv18_gpus_on_one_numa_node():
    k8s_fleet([make_report("dgx-01")])
    result = placement_find(cluster="prod", gpus=4)
    assert result.fits and result.kind == "kubernetes"
    (node,) = result.nodes
    assert node.link_class == "NV18" and node.gpu_count == 4
    assert indexes(node) == [0, 1, 2, 3] and node.numa_nodes == [0]
    assert all(g.uuid.startswith("GPU-") for g in node.gpus)
    assert node.nics == ["mlx5_0", "mlx5_1"]  # GPUs 0 and 1 sit by a NIC (PIX)


def test_pcie_server_picks_4_gpus_under_one_switch():
    k8s_fleet([pcie_report("pcie-01", [[4, 5, 6, 7], [0, 1, 2, 3]])])
    (node,) = placement_find(cluster="prod", gpus=4).nodes
    assert node.link_class == "PIX"
    assert indexes(node) in ([0, 1, 2, 3], [4, 5, 6, 7])


def test_pcie_server_with_switch_pairs_picks_the_best_worst_pair_set():
    k8s_fleet([pcie_report("pcie-01", [[0, 1], [2, 3], [4, 5], [6, 7]])])
    (four,) = placement_find(cluster="prod", gpus=4).nodes
    assert four.link_class == "NODE"  # never across the sockets (SYS)
    assert set(four.numa_nodes) == {0} or set(four.numa_nodes) == {1}
    (two,) = placement_find(cluster="prod", gpus=2).nodes
    assert two.link_class == "PIX" and indexes(two) == [0, 1]


def test_nvlink_only_excludes_a_pcie_server_and_says_so():
    k8s_fleet([pcie_report("pcie-01", [[0, 1, 2, 3], [4, 5, 6, 7]]), make_report("dgx-01")])
    result = placement_find(cluster="prod", gpus=4, nvlink_only=True)
    assert names(result) == ["dgx-01"]
    assert result.nodes[0].link_class == "NV18"
    assert [(b.node, b.reason) for b in result.blocked] == [("pcie-01", "nvlink")]


def test_pod_of_9_on_8_gpu_nodes_does_not_fit_says_why_and_offers_alternatives():
    k8s_fleet([make_report("dgx-01"), make_report("dgx-02")])
    result = placement_find(cluster="prod", gpus=9)
    assert not result.fits and result.nodes == [] and result.total_gpus == 0
    assert "a Kubernetes pod runs on one node: no node has 9 free GPUs" in result.reason
    assert "the most on one node is 8" in result.reason
    assert {b.reason for b in result.blocked} == {"too_small"}
    offered = {(a.node_count, a.gpus_per_node) for a in result.alternatives}
    assert (1, 8) in offered  # fewer GPUs in one pod
    assert all(a.params["cluster"] == "prod" for a in result.alternatives)
    # 9 as 3 pods x 3 fits on two 8-GPU nodes? no: it needs 3 nodes; none is offered
    assert (3, 3) not in offered


def test_used_gpus_from_pods_reduce_what_is_free():
    k8s_fleet([make_report("dgx-01"), make_report("dgx-02")])
    snapshot_ingest(cluster_name="prod", raw=pods(("dgx-01", 6)))
    result = placement_find(cluster="prod", gpus=2)
    assert names(result) == ["dgx-01"]  # the tightest fit keeps dgx-02 whole
    assert result.nodes[0].free_gpus == 2 and not result.nodes[0].in_use_known
    result = placement_find(cluster="prod", gpus=4)
    assert names(result) == ["dgx-02"]
    assert [(b.node, b.reason) for b in result.blocked] == [("dgx-01", "in_use")]


def test_mig_profile_fits_on_a_node_offering_free_mig_devices():
    report = make_report("a100-01", model="NVIDIA A100-SXM4-80GB", mig_gpus={0: ["1g.10gb"] * 7})
    node = k8s_node(
        "a100-01",
        system_uuid=report["host"]["system_uuid"],
        gpus=7,
        labels={"nvidia.com/mig.strategy": "mixed"},
        extra_resources={"nvidia.com/mig-1g.10gb": 7},
    )
    k8s_fleet([report, make_report("dgx-01")], nodes=[node, k8s_node("dgx-01", gpus=8)])
    result = placement_find(cluster="prod", gpus=3, mig_profile="1g.10gb")
    assert result.fits
    (chosen,) = result.nodes
    assert chosen.node == "a100-01" and chosen.gpu_count == 3
    assert len(chosen.gpus) == 3 and {g.mig_profile for g in chosen.gpus} == {"1g.10gb"}
    assert all(g.mig_uuid.startswith("MIG-") and g.index == 0 for g in chosen.gpus)
    assert ("dgx-01", "mig_layout") in {(b.node, b.reason) for b in result.blocked}

    snapshot_ingest(cluster_name="prod", raw=pods(("a100-01", 5), mig="1g.10gb"))
    short = placement_find(cluster="prod", gpus=3, mig_profile="mig-1g.10gb")
    assert not short.fits
    assert ("a100-01", "in_use") in {(b.node, b.reason) for b in short.blocked}

    other = placement_find(cluster="prod", mig_profile="3g.40gb")
    assert not other.fits
    blocked = {b.node: b for b in other.blocked}
    assert blocked["a100-01"].reason == "mig_layout"
    assert "7x 1g.10gb" in blocked["a100-01"].detail


def test_drained_and_not_ready_nodes_are_excluded_and_listed_as_blocked():
    reports = [make_report(n) for n in ("gpu000", "gpu001", "gpu002")]
    slurm_fleet(["gpu000", "gpu001", "gpu002"], reports=reports)
    snapshot_ingest(
        cluster_name="hpc",
        raw=scontrol_text(
            scontrol_node("gpu000", state="IDLE+DRAIN", reason="fan replacement"),
            scontrol_node("gpu001", state="DOWN+NOT_RESPONDING"),
            scontrol_node("gpu002"),
        ),
    )
    k8s = [make_report(n) for n in ("k8s-a", "k8s-b", "k8s-c")]
    apply_reports(*k8s)
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(
            k8s_node("k8s-a", system_uuid=k8s[0]["host"]["system_uuid"], ready=False),
            k8s_node("k8s-b", system_uuid=k8s[1]["host"]["system_uuid"], unschedulable=True),
            k8s_node("k8s-c", system_uuid=k8s[2]["host"]["system_uuid"]),
        ),
    )
    reconcile_all()
    result = placement_find(gpus=8)
    placed = {n.node for n in result.nodes} | {n.node for n in result.candidates}
    assert placed == {"gpu002", "k8s-c"}
    reasons = {b.node: (b.reason, b.detail) for b in result.blocked}
    assert reasons["gpu000"][0] == "not_schedulable" and "fan replacement" in reasons["gpu000"][1]
    assert reasons["gpu001"][0] == "not_ready"
    assert reasons["k8s-a"][0] == "not_ready" and reasons["k8s-a"][1].startswith("NotReady")
    assert reasons["k8s-b"][0] == "not_schedulable"
    assert result.blocked_counts == {"not_schedulable": 2, "not_ready": 2}


def test_lost_gpu_is_not_offered_and_blocks_a_full_node_request():
    servers = k8s_fleet([make_report("dgx-01")])
    Gpu.objects.filter(server=servers["dgx-01"], index=3).update(status="lost")
    result = placement_find(cluster="prod", gpus=8)
    assert not result.fits
    (blocked,) = result.blocked
    assert blocked.reason == "unhealthy_gpu" and "1 lost" in blocked.detail
    (node,) = placement_find(cluster="prod", gpus=7).nodes
    assert 3 not in indexes(node)


def test_node_without_an_agent_is_placed_by_scheduler_counts():
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(k8s_node("ghost", gpus=4)))
    reconcile_all()
    (node,) = placement_find(cluster="prod", gpus=4).nodes
    assert node.node == "ghost" and node.server is None
    assert node.gpus == [] and node.link_class is None and node.gpu_count == 4
    result = placement_find(cluster="prod", gpus=2, nvlink_only=True)
    assert not result.fits and result.blocked[0].reason == "nvlink"


def test_without_a_cluster_every_cluster_is_tried_with_its_own_semantics():
    k8s_fleet([make_report("dgx-01"), make_report("dgx-02")])
    slurm_fleet(["gpu000", "gpu001"])
    result = placement_find(gpus=16)
    assert result.fits and result.cluster == "hpc" and result.kind == "slurm"
    answers = {c.cluster: c for c in result.clusters}
    assert not answers["prod"].fits and answers["prod"].kind == "kubernetes"
    assert answers["prod"].request == "one pod with 16 GPU(s) on one node"
    assert answers["hpc"].fits and answers["hpc"].node_count == 2
    pod = placement_find(gpus=8)
    kinds = {n.kind for n in pod.nodes + pod.candidates}
    assert kinds == {"kubernetes", "slurm"}


def test_a_pod_request_over_every_cluster_considers_kubernetes_only_and_says_so():
    k8s_fleet([make_report("dgx-01"), make_report("dgx-02")])
    slurm_fleet(["gpu000", "gpu001"])
    pod = placement_find(gpus=16, scheduler="kubernetes")
    assert not pod.fits  # one pod of 16 on 8-GPU nodes; Slurm's 2 x 8 is not asked
    assert [c.cluster for c in pod.clusters] == ["prod"]
    assert {n.kind for n in pod.nodes + pod.candidates} <= {"kubernetes"}
    assert all(b.kind == "kubernetes" for b in pod.blocked)
    assert {a.cluster for a in pod.alternatives} == {"prod"}
    assert all(a.params["scheduler"] == "kubernetes" for a in pod.alternatives)
    assert pod.scheduler == "kubernetes" and pod.request["scheduler"] == "kubernetes"
    assert pod.scope == "Kubernetes clusters only: hpc (Slurm) not considered"
    eight = placement_find(gpus=8, scheduler="kubernetes")
    assert eight.fits and eight.kind == "kubernetes"
    assert {n.kind for n in eight.nodes + eight.candidates} == {"kubernetes"}
    job = placement_find(gpus=16, scheduler="slurm")
    assert job.fits and job.cluster == "hpc" and [c.cluster for c in job.clusters] == ["hpc"]
    assert job.scope == "Slurm clusters only: prod (Kubernetes) not considered"
    anywhere = placement_find(gpus=16)
    assert anywhere.scheduler is None and anywhere.scope is None
    assert {c.cluster for c in anywhere.clusters} == {"prod", "hpc"}


def test_a_scheduler_with_no_cluster_or_another_kinds_cluster_says_so():
    slurm_fleet(["gpu000"])
    result = placement_find(gpus=1, scheduler="kubernetes")
    assert not result.fits and result.reason == "no Kubernetes cluster with nodes"
    with pytest.raises(PlacementRequestError) as exc:
        placement_find(cluster="hpc", gpus=1, scheduler="kubernetes")
    assert exc.value.field == "scheduler" and "hpc is a Slurm cluster" in str(exc.value)
    assert placement_find(cluster="hpc", gpus=1, scheduler="slurm").scope is None
    with pytest.raises(PlacementRequestError) as exc:
        placement_find(gpus=1, scheduler="pbs")
    assert exc.value.field == "scheduler"


def shared_server_with_six_gpus_used_by_slurm() -> None:
    """dgx-01: a node of Kubernetes cluster prod and Slurm cluster hpc; Slurm uses GPUs 0-5."""
    k8s_fleet([make_report("dgx-01")])
    snapshot_ingest(
        cluster_name="hpc",
        raw=scontrol_node("dgx-01").replace(
            "   Gres=", "   GresUsed=gpu:h100:6(IDX:0-5)\n   Gres="
        ),
    )
    reconcile_all()


def test_a_kubernetes_request_still_sees_what_slurm_uses_on_a_shared_server():
    shared_server_with_six_gpus_used_by_slurm()
    assert not placement_find(gpus=4, scheduler="kubernetes").fits
    (node,) = placement_find(gpus=2, scheduler="kubernetes").nodes
    assert node.kind == "kubernetes" and indexes(node) == [6, 7]


def test_a_server_in_both_schedulers_lends_its_gpus_once():
    shared_server_with_six_gpus_used_by_slurm()
    result = placement_find(cluster="prod", gpus=4)
    assert not result.fits
    assert "2 of 8 GPUs free" in result.blocked[0].detail
    (node,) = placement_find(cluster="prod", gpus=2).nodes
    assert indexes(node) == [6, 7]


def test_model_and_memory_filters_and_the_other_model_alternative():
    k8s_fleet([make_report("dgx-01"), pcie_report("l40s-01", [[0, 1, 2, 3], [4, 5, 6, 7]])])
    assert names(placement_find(cluster="prod", gpus=8, model="L40S")) == ["l40s-01"]
    assert names(placement_find(cluster="prod", gpus=8, model="h100 hbm3")) == ["dgx-01"]
    assert not placement_find(cluster="prod", gpus=1, model="H100 PCIe").fits
    big = placement_find(cluster="prod", gpus=1, min_gpu_memory_bytes=100 * 2**30)
    assert not big.fits and big.blocked_counts == {"memory": 2}
    result = placement_find(cluster="prod", gpus=8, model="L40S", nvlink_only=True)
    assert not result.fits
    described = [a.description for a in result.alternatives]
    assert any("NVIDIA H100 80GB HBM3" in d for d in described)
    assert any("without NVLink-only" in d for d in described)


def test_requests_that_are_not_well_formed():
    with pytest.raises(PlacementRequestError) as exc:
        placement_find(nodes=2)
    assert exc.value.field == "gpus"
    with pytest.raises(PlacementRequestError):
        placement_find(gpus=10, gpus_per_node=4)
    with pytest.raises(PlacementRequestError):
        placement_find(gpus=1, mig_profile="huge")
    assert gpu_memory_text("80GB") == 80 * 2**30
    assert gpu_memory_text("81920MiB") == 80 * 2**30
    assert gpu_memory_text("40") == 40 * 2**30


def test_unknown_cluster_does_not_fit_and_says_so():
    result = placement_find(cluster="nowhere", gpus=1)
    assert not result.fits and "no cluster 'nowhere'" in result.reason


def test_placement_costs_the_same_queries_for_few_and_many_nodes():
    def count(n: int, prefix: str) -> int:
        slurm_fleet(
            [f"{prefix}{i:03d}" for i in range(n)],
            cluster=prefix,
            reports=[pcie_report(f"{prefix}{i:03d}", [[0, 1], [2, 3]]) for i in range(n)],
        )
        with CaptureQueriesContext(connection) as queries:
            placement_find(cluster=prefix, gpus=4)
        return len(queries)

    assert count(2, "few") == count(12, "many")


def test_the_fabric_is_read_only_for_a_request_that_may_span_nodes(monkeypatch):
    """A Kubernetes pod runs on one node: its placement never reads the fabric (at 25,000
    servers that read is the heaviest of all); a Slurm spread or a multi-node request does."""
    from placement import service

    k8s_fleet([make_report("dgx-01")])
    slurm_fleet(["dgx-02"])
    read: list[bool] = []
    monkeypatch.setattr(service, "fleet_places", lambda: read.append(True) or {})
    for request, reads_fabric in (
        ({"cluster": "prod", "gpus": 9}, False),
        ({"scheduler": "kubernetes", "gpus": 4}, False),
        ({"gpus": 1}, False),
        ({"cluster": "prod", "nodes": 2, "gpus_per_node": 4}, True),
        ({"cluster": "hpc", "gpus": 9}, True),
        ({"gpus": 9}, True),  # Slurm may spread it
    ):
        read.clear()
        placement_find(**request)
        assert bool(read) is reads_fabric, request


# Capacity planner -----------------------------------------------------------------------


def test_capacity_planner_compares_dense_and_sparse_layouts():
    result = capacity_compare(gpus=80, per_server=[1, 8, 4])
    dense, middle, sparse = result["layouts"]
    assert (dense.servers, dense.gpus_per_server) == (10, 8)
    assert (middle.servers, sparse.servers) == (20, 80)
    assert dense.largest_job_one_node == 8 and sparse.largest_job_one_node == 1
    assert dense.gpus_lost_per_server_failure == 8 and dense.share_lost_per_server_failure == 0.1
    assert dense.gpu_pairs == 3160 and dense.pairs_within_server == 10 * 28
    assert dense.share_nvlink == round(280 / 3160, 4)
    assert middle.pairs_within_server == 20 * 6
    assert sparse.pairs_within_server == 0 and sparse.share_over_network == 1.0
    assert sparse.within_server_link is None
    pcie = capacity_compare(gpus=12, per_server=[8], nvlink=False)["layouts"][0]
    assert (pcie.servers, pcie.spare_gpus, pcie.share_nvlink) == (2, 4, 0.0)
    with pytest.raises(CapacityRequestError):
        capacity_compare(gpus=8, per_server=[0])


def test_a_request_that_does_not_fit_its_cluster_names_another_that_fits():
    k8s_fleet([make_report("dgx-01"), make_report("dgx-02")])
    slurm_fleet(["gpu000", "gpu001"])
    result = placement_find(cluster="prod", gpus=16)
    assert not result.fits
    elsewhere = [a for a in result.alternatives if a.cluster == "hpc"]
    assert elsewhere and elsewhere[0].params == {"cluster": "hpc", "gpus": 16}
    assert elsewhere[0].nodes == ["gpu000", "gpu001"] and elsewhere[0].kind == "slurm"


def test_mig_strategy_single_counts_mig_devices_not_gpus():
    report = make_report("a100-01", model="NVIDIA A100-SXM4-40GB", mig_gpus={0: ["1g.5gb"] * 7})
    node = k8s_node(
        "a100-01",
        system_uuid=report["host"]["system_uuid"],
        gpus=7,
        labels={
            "nvidia.com/mig.strategy": "single",
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
        },
    )
    k8s_fleet([report], nodes=[node])
    mig = placement_find(cluster="prod", gpus=7, mig_profile="1g.5gb")
    assert mig.fits and mig.nodes[0].gpu_count == 7
    whole = placement_find(cluster="prod", gpus=1)
    assert not whole.fits and whole.blocked[0].reason == "mig_layout"


def test_many_servers_without_a_summary_cost_the_same_queries(
    django_assert_num_queries, monkeypatch
):
    """Past `IN_LIST_LIMIT` stale servers the reads take a subquery: it is run as part of
    the row reads, never on its own."""
    from placement import selectors

    names = ["pcie-01", "pcie-02"]
    slurm_fleet(names, reports=[pcie_report(n, [[0, 1], [2, 3]]) for n in names])
    monkeypatch.setattr(selectors, "IN_LIST_LIMIT", 0)
    with django_assert_num_queries(5):
        assert [n.healthy_whole for n in fleet_counts().nodes] == [8, 8]
    with django_assert_num_queries(10):  # and the GPUs running workloads hold
        assert [len(n.gpus) for n in fleet_load(with_mig=True).nodes] == [8, 8]


def test_the_reads_cost_the_queries_their_docstrings_say(django_assert_num_queries):
    """Two PCIe servers (mixed link classes: pairs are read) and one in MIG mode."""
    names = ["pcie-01", "pcie-02"]
    slurm_fleet(names, reports=[pcie_report(n, [[0, 1], [2, 3]]) for n in names])
    slurm_fleet(
        ["mig-01"], cluster="mig", reports=[make_report("mig-01", mig_gpus={0: ["1g.10gb"]})]
    )

    for summarized in (False, True):  # rows, then summaries: the same round trips
        if summarized:
            assert placement_summaries_refresh() == 3
        # needing action, critical findings, nodes with their summary shapes, clusters; the
        # summaries of the servers standing for their twins (counts, or GPUs); the rows of
        # servers without a summary: their GPU counts, or their GPUs, MIG devices, link
        # classes and mixed pairs; placement reads the GPUs running workloads hold too
        with django_assert_num_queries(5):
            assert sum(n.weight for n in fleet_counts().nodes) == 3
        with django_assert_num_queries(6 if summarized else 9):
            assert fleet_load(with_mig=True).summarized == (3 if summarized else 0)
        with django_assert_num_queries(6 if summarized else 8):
            fleet_load()
    with django_assert_num_queries(3):  # clusters, GPU models, MIG profiles
        assert placement_choices()["mig_profiles"] == ["1g.10gb"]
