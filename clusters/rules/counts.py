"""Rules on how many GPUs (and MIG devices) a scheduler offers against what the agent counts.

Kubernetes: `nvidia.com/gpu` (or `nvidia.com/gpu.shared` under time-slicing with
renameByDefault) times the time-slicing replicas, against the server's GPUs as the MIG
strategy counts them (single: MIG devices; mixed: GPUs outside MIG mode, the MIG devices as
`nvidia.com/mig-*`). Slurm: the `gpu` GRES, whole and MIG-typed, against the same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from agent.mig import normalize_mig_profile
from findings.choices import FindingType, Severity
from findings.facts import FindingFact

from ..choices import ClusterKind
from .types import Fleet, NodeFacts, ServerFacts
from .words import agent_gpus, plural, profile_text

SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"


Judge = Callable[[NodeFacts, ServerFacts], FindingFact | None]


def _per_kind(fleet: Fleet, kubernetes: Judge, slurm: Judge) -> list[FindingFact]:
    """Each bound (node, server) pair judged by its scheduler's own rule."""
    found = []
    for node, server in fleet.bound:
        judge = kubernetes if node.kind == ClusterKind.KUBERNETES else slurm
        finding = judge(node, server)
        if finding is not None:
            found.append(finding)
    return found


def gpu_count_mismatch(fleet: Fleet) -> list[FindingFact]:
    """A bound node whose scheduler offers another number of GPUs than the agent counts."""
    return _per_kind(fleet, _kubernetes_count, _slurm_count)


def mig_mismatch(fleet: Fleet) -> list[FindingFact]:
    """A bound node whose scheduler offers another MIG layout than the agent reports (or,
    in Slurm, counts MIG-enabled GPUs as whole GPUs)."""
    return _per_kind(fleet, _kubernetes_mig, _slurm_mig)


# Kubernetes ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KubernetesCount:
    """What a Kubernetes node advertises, and what it should from the agent's GPUs."""

    resource: str
    advertised: int
    allocatable: int
    strategy: str
    expected: int
    what: str


def kubernetes_count(node: NodeFacts, server: ServerFacts) -> KubernetesCount:
    """The GPU resource a node advertises (`nvidia.com/gpu`, else `nvidia.com/gpu.shared`)
    and the count the server's GPUs should make of it under the node's MIG strategy (from its
    label, else `mixed` where MIG resources show, `single` where the server has MIG GPUs)."""
    advertised, allocatable = node.gpu_capacity, node.gpu_allocatable
    resource = "nvidia.com/gpu"
    if node.shared_gpus and not advertised:
        advertised, allocatable = node.shared_gpus
        resource = SHARED_GPU_RESOURCE
    strategy = node.mig_strategy
    if not strategy:
        strategy = "mixed" if node.mig_resources else ("single" if server.mig_gpus else "none")
    if strategy == "single" and server.mig_gpus:
        expected = server.mig_devices
        what = f"{plural(server.mig_devices, 'MIG device')} (MIG strategy single)"
    elif strategy == "mixed":
        expected, what = server.whole_gpus, f"{plural(server.whole_gpus, 'GPU')} outside MIG mode"
    else:
        expected, what = server.gpus, plural(server.gpus, "GPU")
    expected *= node.gpu_replicas
    if node.gpu_replicas > 1:
        what += f", x{node.gpu_replicas} time-slicing replicas"
    return KubernetesCount(resource, advertised, allocatable, strategy, expected, what)


def _kubernetes_count(node: NodeFacts, server: ServerFacts) -> FindingFact | None:
    count = kubernetes_count(node, server)
    advertised, allocatable, expected = count.advertised, count.allocatable, count.expected
    if advertised == expected and allocatable >= advertised:
        return None  # the cheap common case: none of the three findings below
    agent = agent_gpus(server)
    if not advertised and not node.gpu_capacity and expected and not node.mig_resources:
        return FindingFact(
            FindingType.GPU_COUNT_MISMATCH,
            Severity.WARNING,
            node.subject,
            f"{node.label}: Kubernetes advertises no nvidia.com/gpu; {agent}. Is the NVIDIA "
            "device plugin running on this node?",
            details={"advertised": 0, "expected": expected},
            server_id=server.id,
            node_id=node.id,
            cluster_id=node.cluster_id,
        )
    if advertised != expected:
        hint = ""
        if advertised > expected and server.lost:
            hint = f"; {plural(server.lost, 'GPU')} lost since the device plugin last counted"
        return FindingFact(
            FindingType.GPU_COUNT_MISMATCH,
            Severity.WARNING,
            node.subject,
            f"{node.label}: Kubernetes advertises {advertised} {count.resource}, expected "
            f"{expected} from {count.what}; {agent}{hint}",
            details={"advertised": advertised, "expected": expected, "agent_gpus": server.gpus},
            server_id=server.id,
            node_id=node.id,
            cluster_id=node.cluster_id,
        )
    if allocatable < advertised:
        missing = advertised - allocatable
        return FindingFact(
            FindingType.GPU_COUNT_MISMATCH,
            Severity.WARNING,
            node.subject,
            f"{node.label}: Kubernetes advertises {advertised} {count.resource} but only "
            f"{allocatable} allocatable; {agent}. The device plugin may have marked {missing} "
            "unhealthy (an Xid error?)",
            details={"capacity": advertised, "allocatable": allocatable, "agent_gpus": server.gpus},
            server_id=server.id,
            node_id=node.id,
            cluster_id=node.cluster_id,
        )
    return None


def _kubernetes_mig(node: NodeFacts, server: ServerFacts) -> FindingFact | None:
    if not (node.mig_resources or server.mig_devices):
        return None
    if kubernetes_count(node, server).strategy != "mixed":
        return None
    offered = Counter({k: v for k, v in node.mig_resources.items() if v})
    if offered == server.mig_profiles:
        return None
    return _layout_mismatch(node, server, "Kubernetes", offered)


# Slurm ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SlurmCount:
    """A Slurm node's `gpu` GRES: any at all, the whole GPUs, the MIG devices by profile."""

    configured: bool
    whole: int
    mig: Counter[str]

    def agrees(self, server: ServerFacts) -> bool:
        return self.whole == server.whole_gpus and self.mig == server.mig_profiles

    def counts_mig_gpus_whole(self, node: NodeFacts, server: ServerFacts) -> bool:
        """Slurm counts the MIG-enabled GPUs as whole GPUs: no MIG GRES, the total right."""
        return bool(server.mig_gpus) and not self.mig and node.gpu_capacity == server.gpus


def slurm_count(node: NodeFacts) -> SlurmCount:
    configured, whole = False, 0
    mig: Counter[str] = Counter()
    for g in node.gres:
        if g.name != "gpu":
            continue
        configured = True
        if not g.mig_profile:
            whole += g.count or 0
        elif profile := normalize_mig_profile(g.mig_profile):
            mig[profile] += g.count or 0
    return SlurmCount(configured, whole, mig)


def _slurm_count(node: NodeFacts, server: ServerFacts) -> FindingFact | None:
    count = slurm_count(node)
    if not count.configured and server.gpus:
        return FindingFact(
            FindingType.GPU_COUNT_MISMATCH,
            Severity.WARNING,
            node.subject,
            f"{node.label}: Slurm has no gpu GRES for this node; {agent_gpus(server)}. "
            "Add Gres=gpu:... to its NodeName line (and gres.conf)",
            details={"gres": 0, "agent_gpus": server.gpus},
            server_id=server.id,
            node_id=node.id,
            cluster_id=node.cluster_id,
        )
    if count.agrees(server) or count.counts_mig_gpus_whole(node, server):
        return None  # the MIG rule says what is wrong, if anything
    if (count.mig or server.mig_devices) and count.whole == server.whole_gpus:
        return None
    total = node.gpu_capacity
    return FindingFact(
        FindingType.GPU_COUNT_MISMATCH,
        Severity.WARNING,
        node.subject,
        f"{node.label}: Slurm's Gres says {plural(total, 'GPU')}"
        + (f" ({count.whole} whole)" if count.mig else "")
        + f"; {agent_gpus(server)}"
        + (" - not in Slurm's config?" if count.whole < server.whole_gpus else ""),
        details={"gres": total, "whole": count.whole, "agent_gpus": server.gpus},
        server_id=server.id,
        node_id=node.id,
        cluster_id=node.cluster_id,
    )


def _slurm_mig(node: NodeFacts, server: ServerFacts) -> FindingFact | None:
    count = slurm_count(node)
    if (not count.configured and server.gpus) or count.agrees(server):
        return None
    if count.counts_mig_gpus_whole(node, server):
        return FindingFact(
            FindingType.MIG_MISMATCH,
            Severity.WARNING,
            node.subject,
            f"{node.label}: Slurm counts {plural(server.mig_gpus, 'MIG-enabled GPU')} as whole "
            f"GPUs; the agent reports {plural(server.mig_devices, 'MIG device')} on them "
            f"({profile_text(server.mig_profiles)}); configure MIG GRES",
            details={
                "gres": [g.to_dict() for g in node.gres],
                "agent_mig": dict(server.mig_profiles),
            },
            server_id=server.id,
            node_id=node.id,
            cluster_id=node.cluster_id,
        )
    if (count.mig or server.mig_devices) and count.mig != server.mig_profiles:
        return _layout_mismatch(node, server, "Slurm", count.mig)
    return None


def _layout_mismatch(
    node: NodeFacts, server: ServerFacts, scheduler: str, offered: Counter[str]
) -> FindingFact:
    return FindingFact(
        FindingType.MIG_MISMATCH,
        Severity.WARNING,
        node.subject,
        f"{node.label}: {scheduler} offers MIG {profile_text(offered)}; the agent reports "
        f"{profile_text(server.mig_profiles)}"
        + (" (MIG re-layout not yet seen by the scheduler?)" if server.mig_devices else ""),
        details={"scheduler": dict(offered), "agent": dict(server.mig_profiles)},
        server_id=server.id,
        node_id=node.id,
        cluster_id=node.cluster_id,
    )
