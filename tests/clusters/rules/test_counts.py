"""GPU count and MIG layout rules on hand-built facts: no database."""

from __future__ import annotations

from clusters.rules.counts import gpu_count_mismatch, mig_mismatch
from clusters.rules.types import ResourceCount
from findings.choices import FindingType

from .fleets import fleet, node, one, server, slurm_node, unhealthy


def counts(s, n):
    f = fleet([s], [n])
    return gpu_count_mismatch(f), mig_mismatch(f)


def test_matching_counts_are_no_finding():
    assert counts(server(), node()) == ([], [])
    assert counts(server(), slurm_node()) == ([], [])


def test_no_device_plugin_on_a_kubernetes_node():
    found = one(gpu_count_mismatch(fleet([server()], [node(gpu_capacity=0)])))
    assert found.type == FindingType.GPU_COUNT_MISMATCH
    assert found.message == (
        "worker-1 (prod): Kubernetes advertises no nvidia.com/gpu; the server has 8. "
        "Is the NVIDIA device plugin running on this node?"
    )
    assert found.details == {"advertised": 0, "expected": 8}


def test_capacity_above_the_agents_count_hints_at_lost_gpus():
    lost = server(gpus=7, unhealthy=unhealthy(a={"status": "lost"}))
    found = one(gpu_count_mismatch(fleet([lost], [node()])))
    assert found.message == (
        "worker-1 (prod): Kubernetes advertises 8 nvidia.com/gpu, expected 7 from 7 GPUs; "
        "the server has 7; 1 GPU lost since the device plugin last counted"
    )


def test_allocatable_below_capacity_is_the_device_plugin_marking_gpus_unhealthy():
    found = one(gpu_count_mismatch(fleet([server()], [node(gpu_allocatable=5)])))
    assert "advertises 8 nvidia.com/gpu but only 5 allocatable" in found.message
    assert "may have marked 3 unhealthy" in found.message


def test_time_slicing_replicas_multiply_the_expected_count():
    assert counts(server(gpus=2), node(gpu_capacity=8, gpu_replicas=4)) == ([], [])
    found = one(counts(server(gpus=2), node(gpu_capacity=6, gpu_replicas=4))[0])
    assert "expected 8 from 2 GPUs, x4 time-slicing replicas" in found.message


def test_renamed_shared_resource_is_counted_instead_of_nvidia_gpu():
    shared = node(gpu_capacity=0, shared_gpus=ResourceCount(16, 16), gpu_replicas=2)
    assert counts(server(), shared) == ([], [])
    short = node(gpu_capacity=0, shared_gpus=ResourceCount(12, 12), gpu_replicas=2)
    assert "advertises 12 nvidia.com/gpu.shared" in one(counts(server(), short)[0]).message


def test_mig_strategy_single_counts_mig_devices():
    mig = server(gpus=1, mig_gpus=1, mig_profiles={"1g.10gb": 7})
    assert counts(mig, node(gpu_capacity=7, mig_strategy="single")) == ([], [])
    found = one(counts(mig, node(gpu_capacity=1))[0])  # strategy inferred: single
    assert "expected 7 from 7 MIG devices (MIG strategy single)" in found.message


def test_mig_strategy_mixed_counts_whole_gpus_and_compares_the_layout():
    mig = server(gpus=8, mig_gpus=1, mig_profiles={"1g.10gb": 7})
    same = node(gpu_capacity=7, mig_resources={"1g.10gb": 7})
    assert counts(mig, same) == ([], [])
    other = node(gpu_capacity=7, mig_resources={"3g.40gb": 2})
    found = one(mig_mismatch(fleet([mig], [other])))
    assert found.type == FindingType.MIG_MISMATCH
    assert found.message == (
        "worker-1 (prod): Kubernetes offers MIG 2x 3g.40gb; the agent reports 7x 1g.10gb "
        "(MIG re-layout not yet seen by the scheduler?)"
    )
    assert found.details == {"scheduler": {"3g.40gb": 2}, "agent": {"1g.10gb": 7}}


def test_slurm_without_gpu_gres():
    found = one(gpu_count_mismatch(fleet([server()], [slurm_node(gres="")])))
    assert found.message == (
        "gpu001 (hpc): Slurm has no gpu GRES for this node; the server has 8. "
        "Add Gres=gpu:... to its NodeName line (and gres.conf)"
    )


def test_slurm_gres_short_of_the_agent():
    found = one(gpu_count_mismatch(fleet([server()], [slurm_node(gres="gpu:h100:6")])))
    assert found.message == (
        "gpu001 (hpc): Slurm's Gres says 6 GPUs; the server has 8 - not in Slurm's config?"
    )
    assert found.details == {"gres": 6, "whole": 6, "agent_gpus": 8}


def test_slurm_counting_mig_gpus_whole_is_a_mig_mismatch_only():
    mig = server(gpus=2, mig_gpus=2, mig_profiles={"3g.40gb": 4})
    gpu, layout = counts(mig, slurm_node(gres="gpu:h100:2"))
    assert gpu == []
    assert one(layout).message == (
        "gpu001 (hpc): Slurm counts 2 MIG-enabled GPUs as whole GPUs; the agent reports "
        "4 MIG devices on them (4x 3g.40gb); configure MIG GRES"
    )


def test_slurm_mig_gres_counted_right_and_a_whole_count_off():
    mig = server(gpus=3, mig_gpus=1, mig_profiles={"1g.10gb": 7})
    assert counts(mig, slurm_node(gres="gpu:h100:2,gpu:1g.10gb:7")) == ([], [])
    gpu, layout = counts(mig, slurm_node(gres="gpu:h100:1,gpu:1g.10gb:7"))
    assert layout == []
    assert one(gpu).message.startswith("gpu001 (hpc): Slurm's Gres says 8 GPUs (1 whole);")


def test_slurm_mig_layout_differs_but_whole_gpus_agree():
    mig = server(gpus=3, mig_gpus=1, mig_profiles={"1g.10gb": 7})
    gpu, layout = counts(mig, slurm_node(gres="gpu:h100:2,gpu:3g.40gb:2"))
    assert gpu == []
    assert one(layout).message.startswith("gpu001 (hpc): Slurm offers MIG 2x 3g.40gb;")


def test_unbound_nodes_are_not_counted():
    assert counts(server(), node(server_id=None, gpu_capacity=0)) == ([], [])
