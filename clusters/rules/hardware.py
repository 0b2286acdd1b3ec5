"""Rules on a server's hardware against what should be there: the GPU model schedulers and
profiles name, GPUs on the PCI bus but not in NVML, MIG changes waiting for a reset, fewer GPUs
than the server's hardware profile."""

from __future__ import annotations

from findings.choices import FindingType, Severity
from findings.facts import FindingFact

from ..choices import ClusterKind
from .types import Fleet, HardwareProfileFacts, NodeFacts, ServerFacts
from .words import model_fits, plural, scheduler_name


def gpu_model_mismatch(fleet: Fleet) -> list[FindingFact]:
    """A scheduler (GFD product label, Slurm GRES type) or a hardware profile names another
    GPU model than the agent's NVML names."""
    found = []
    for node, server in fleet.bound:
        if server.names:
            finding = _node_model_mismatch(node, server)
            if finding is not None:
                found.append(finding)
    for server_id, profile in fleet.profiles.items():
        s = fleet.servers.get(server_id)
        if s is None or not (profile.expected_gpu_model and s.names):
            continue
        if not _short_sides(s, profile, fleet):
            continue  # as before the split: judged only on a server below its profile
        if not model_fits(profile.expected_gpu_model, s.names):
            found.append(
                FindingFact(
                    FindingType.GPU_MODEL_MISMATCH,
                    Severity.WARNING,
                    f"server:{s.id}:profile",
                    f"{s.hostname}: profile {profile.name} expects {profile.expected_gpu_model}; "
                    f"the agent reports {', '.join(sorted(s.names))}",
                    server_id=s.id,
                )
            )
    return found


def _node_model_mismatch(node: NodeFacts, server: ServerFacts) -> FindingFact | None:
    product = node.gpu_product
    if node.kind == ClusterKind.SLURM:
        types = [g.type for g in node.gpu_gres if g.type and not g.mig_profile]
        product = ", ".join(t for t in types if not model_fits(t, server.names))
    if not product or model_fits(product, server.names):
        return None
    return FindingFact(
        FindingType.GPU_MODEL_MISMATCH,
        Severity.WARNING,
        node.subject,
        f"{node.label}: {scheduler_name(node.kind)} says the GPUs are {product}; the agent "
        f"reports {', '.join(sorted(server.names))}",
        details={"scheduler": product, "agent": sorted(server.names)},
        server_id=server.id,
        node_id=node.id,
        cluster_id=node.cluster_id,
    )


def gpu_not_in_nvml(fleet: Fleet) -> list[FindingFact]:
    """More NVIDIA GPUs on the PCI bus than NVML sees: fallen off the bus, or no driver."""
    return [
        FindingFact(
            FindingType.GPU_NOT_IN_NVML,
            Severity.CRITICAL,
            s.subject,
            f"{s.hostname}: {plural(s.pci_gpu_count, 'GPU')} on the PCI bus, NVML sees "
            f"{s.gpus}: {s.pci_gpu_count - s.gpus} fell off the bus or lack a driver "
            "(check dmesg for Xid 79)",
            server_id=s.id,
            details={"pci": s.pci_gpu_count, "nvml": s.gpus},
        )
        for s in fleet.servers.values()
        if s.pci_gpu_count is not None and s.pci_gpu_count > s.gpus
    ]


def mig_pending_reboot(fleet: Fleet) -> list[FindingFact]:
    """GPUs whose MIG mode changes at the next reset: schedulers still see the old layout."""
    return [
        FindingFact(
            FindingType.MIG_PENDING_REBOOT,
            Severity.INFO,
            s.subject,
            f"{s.hostname}: MIG mode changes on {plural(s.mig_pending, 'GPU')} at the next "
            "GPU reset or reboot; schedulers still see the old layout",
            server_id=s.id,
        )
        for s in fleet.servers.values()
        if s.mig_pending
    ]


def below_profile(fleet: Fleet) -> list[FindingFact]:
    """Fewer GPUs than the server's hardware profile expects, on any side (NVML, the PCI bus,
    each scheduler), with the likely cause."""
    found = []
    for server_id, profile in fleet.profiles.items():
        s = fleet.servers.get(server_id)
        if s is None:
            continue
        sides = gpu_counts_by_side(s, fleet.nodes_by_server.get(s.id, ()))
        short = _short_sides(s, profile, fleet, sides)
        if short:
            found.append(_below_profile(s, profile, sides, short))
    return found


def _short_sides(
    s: ServerFacts,
    profile: HardwareProfileFacts,
    fleet: Fleet,
    sides: dict[str, int] | None = None,
) -> dict[str, int]:
    """The sides that count fewer GPUs than the profile expects."""
    if sides is None:
        sides = gpu_counts_by_side(s, fleet.nodes_by_server.get(s.id, ()))
    return {k: v for k, v in sides.items() if v < profile.expected_gpu_count}


def gpu_counts_by_side(server: ServerFacts, nodes: tuple[NodeFacts, ...]) -> dict[str, int]:
    """The server's GPUs as each side counts them: NVML, the PCI bus, and every bound node
    that counts whole GPUs (no MIG resources or GRES, no time-slicing replicas)."""
    sides = {"NVML": server.gpus}
    if server.pci_gpu_count is not None:
        sides["PCI bus"] = server.pci_gpu_count
    for node in nodes:
        if node.kind == ClusterKind.KUBERNETES:
            if not node.mig_resources and not node.gpu_replicas > 1:
                sides[f"Kubernetes allocatable ({node.name})"] = node.gpu_allocatable
        elif not any(g.mig_profile for g in node.gres):
            sides[f"Slurm GRES ({node.name})"] = node.gpu_capacity
    return sides


def _below_profile(
    s: ServerFacts, profile: HardwareProfileFacts, sides: dict[str, int], short: dict[str, int]
) -> FindingFact:
    expected = profile.expected_gpu_count
    causes = []
    pci = sides.get("PCI bus")
    if pci is not None and pci >= expected and s.gpus < expected:
        causes.append("on the PCI bus but not in NVML: fell off the bus or driver not bound")
    elif pci is not None and pci < expected:
        causes.append("missing from the PCI bus: seated badly, dead, or removed")
    if any(k.startswith("Kubernetes") for k in short) and s.gpus >= expected:
        causes.append("NVML sees them, Kubernetes does not: marked unhealthy by the device plugin")
    if any(k.startswith("Slurm") for k in short) and s.gpus >= expected:
        causes.append("NVML sees them, Slurm does not: not in Slurm's config")
    if s.mig_gpus:
        causes.append("MIG re-layout may change how schedulers count")
    listed = ", ".join(f"{k} {v}" for k, v in sides.items())
    return FindingFact(
        FindingType.BELOW_PROFILE,
        Severity.CRITICAL if s.gpus < expected else Severity.WARNING,
        s.subject,
        f"{s.hostname}: profile {profile.name} expects {plural(expected, 'GPU')}"
        + (f" ({profile.expected_gpu_model})" if profile.expected_gpu_model else "")
        + f"; {listed}"
        + (f". Likely: {'; '.join(causes)}" if causes else ""),
        server_id=s.id,
        details={"expected": expected, "sides": sides, "short": sorted(short)},
    )
