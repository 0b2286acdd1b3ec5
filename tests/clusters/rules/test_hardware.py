"""Hardware rules on hand-built facts: model, PCI bus vs NVML, MIG pending, hardware profiles.
No database."""

from __future__ import annotations

from clusters.rules.hardware import (
    below_profile,
    gpu_model_mismatch,
    gpu_not_in_nvml,
    mig_pending_reboot,
)
from findings.choices import FindingType, Severity

from .fleets import fleet, node, one, profile, server, slurm_node


def test_a_gfd_label_naming_another_model():
    n = node(gpu_product="NVIDIA-A100-SXM4-40GB")
    found = one(gpu_model_mismatch(fleet([server()], [n])))
    assert (found.type, found.subject) == (FindingType.GPU_MODEL_MISMATCH, "node:1")
    assert found.message == (
        "worker-1 (prod): Kubernetes says the GPUs are NVIDIA-A100-SXM4-40GB; the agent "
        "reports NVIDIA H100 80GB HBM3"
    )
    assert gpu_model_mismatch(fleet([server()], [node(gpu_product="NVIDIA-H100-80GB-HBM3")])) == []


def test_slurm_names_only_the_gres_types_that_do_not_fit():
    n = slurm_node(gres="gpu:h100:4,gpu:a100:4,gpu:1g.10gb:7")
    found = one(gpu_model_mismatch(fleet([server()], [n])))
    assert found.details == {"scheduler": "a100", "agent": ["NVIDIA H100 80GB HBM3"]}
    assert gpu_model_mismatch(fleet([server()], [slurm_node(gres="gpu:h100:8")])) == []


def test_no_model_finding_without_the_agents_names():
    n = node(gpu_product="NVIDIA-A100-SXM4-40GB")
    assert gpu_model_mismatch(fleet([server(names=frozenset())], [n])) == []


def test_gpus_on_the_pci_bus_that_nvml_does_not_see():
    found = one(gpu_not_in_nvml(fleet([server(gpus=7, pci_gpu_count=8)], [])))
    assert (found.severity, found.subject, found.details) == (
        Severity.CRITICAL,
        "server:1",
        {"pci": 8, "nvml": 7},
    )
    assert found.message == (
        "dgx-01: 8 GPUs on the PCI bus, NVML sees 7: 1 fell off the bus or lack a driver "
        "(check dmesg for Xid 79)"
    )
    assert gpu_not_in_nvml(fleet([server(pci_gpu_count=8)], [])) == []


def test_mig_mode_pending_a_reset():
    found = one(mig_pending_reboot(fleet([server(mig_pending=2), server(2)], [])))
    assert (found.severity, found.server_id) == (Severity.INFO, 1)
    assert found.message.startswith("dgx-01: MIG mode changes on 2 GPUs at the next GPU reset")


def test_below_profile_lists_every_side_and_the_likely_cause():
    s = server(gpus=7, pci_gpu_count=8)
    f = fleet([s], [node(gpu_allocatable=7, gpu_capacity=7)], profiles={1: profile()})
    found = one(below_profile(f))
    assert (found.type, found.severity) == (FindingType.BELOW_PROFILE, Severity.CRITICAL)
    assert found.message == (
        "dgx-01: profile dgx-h100 expects 8 GPUs (H100); NVML 7, PCI bus 8, Kubernetes "
        "allocatable (worker-1) 7. Likely: on the PCI bus but not in NVML: fell off the bus "
        "or driver not bound"
    )
    assert found.details["short"] == ["Kubernetes allocatable (worker-1)", "NVML"]


def test_a_scheduler_short_of_the_profile_is_a_warning_with_its_cause():
    f = fleet([server()], [slurm_node(gres="gpu:h100:6")], profiles={1: profile()})
    found = one(below_profile(f))
    assert found.severity == Severity.WARNING
    assert found.message.endswith("Likely: NVML sees them, Slurm does not: not in Slurm's config")


def test_mig_and_time_sliced_nodes_are_not_a_side_of_the_profile():
    nodes = [
        node(gpu_allocatable=32, gpu_capacity=32, gpu_replicas=4),
        slurm_node(2, gres="gpu:1g.10gb:7"),
    ]
    assert below_profile(fleet([server()], nodes, profiles={1: profile()})) == []


def test_the_profiles_model_is_judged_on_a_server_below_its_profile():
    """As before the rules were split: the profile's model is compared only when a side is
    short of the profile."""
    a100 = frozenset({"NVIDIA A100-SXM4-40GB"})
    full = fleet([server(names=a100)], [], profiles={1: profile()})
    assert gpu_model_mismatch(full) == []
    short = fleet([server(names=a100, gpus=7)], [], profiles={1: profile()})
    found = one(gpu_model_mismatch(short))
    assert found.subject == "server:1:profile"
    assert found.message == (
        "dgx-01: profile dgx-h100 expects H100; the agent reports NVIDIA A100-SXM4-40GB"
    )
