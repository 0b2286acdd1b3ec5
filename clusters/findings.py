"""Finding rules: where the layers disagree, as plain functions over what reconciliation read.

`findings_for` turns bound nodes, server facts and clusters into the set of findings that
should be open now; `clusters.reconcile` writes that set (raising, reopening, resolving).
No queries here except the hardware profiles.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings

from agent.mig import normalize_mig_profile
from inventory.gpu_models import gpu_models_agree
from inventory.health import PROBLEMS, GpuHealth, GpuProblem
from inventory.identity import short_hostname
from inventory.models import HardwareProfile
from inventory.selectors import hardware_profile_for

from .choices import ClusterKind, FindingType, Severity

SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
PROBLEM_TEXT = {
    GpuProblem.LOST: "lost",
    GpuProblem.NVML_ERROR: "failing NVML queries",
    GpuProblem.ROW_REMAP_FAILED: "with a failed row remap",
    GpuProblem.RESET_PENDING: "with page retirement/row remap pending a reset",
    GpuProblem.UNCORRECTED_ECC: "with uncorrected ECC errors",
}
"""How an unhealthy-GPU finding counts each reason: `2 GPU(s) lost`."""
CRITICAL_PROBLEMS = {GpuProblem.LOST, GpuProblem.NVML_ERROR, GpuProblem.ROW_REMAP_FAILED}


@dataclass
class ServerFacts:
    """What reconciliation needs of one server, read in bulk."""

    id: int
    hostname: str
    fqdn: str
    system_uuid: str | None
    machine_id: str | None
    addresses: list[str]
    last_seen: Any
    driver_version: str
    cuda_version: str
    vendor: str
    product: str
    profile_id: int | None
    pci_gpu_count: int | None
    is_virtual: bool
    physical_host_id: int | None
    nvml_error: str
    gpus: int = 0
    mig_gpus: int = 0
    mig_pending: int = 0
    names: set[str] = field(default_factory=set)
    mig_profiles: Counter = field(default_factory=Counter)
    gpu_claims: list[dict] = field(default_factory=list)  # inventory.GpuClaim rows, held elsewhere
    unhealthy: dict[str, GpuHealth] = field(default_factory=dict)
    """The server's unhealthy GPUs by UUID (`inventory.health`)."""

    @property
    def mig_devices(self) -> int:
        return sum(self.mig_profiles.values())

    @property
    def whole_gpus(self) -> int:
        return self.gpus - self.mig_gpus

    @property
    def lost(self) -> int:
        return self.problem_counts()[GpuProblem.LOST]

    def problem_counts(self) -> Counter:
        """GPUs per reason; a GPU with two reasons counts under both."""
        return Counter(r for health in self.unhealthy.values() for r in health.reasons)

    def health_problems(self) -> list[str]:
        counts = self.problem_counts()
        return [f"{counts[p]} GPU(s) {PROBLEM_TEXT[p]}" for p in PROBLEMS if counts[p]]


@dataclass
class Desired:
    """A finding as this reconciliation sees it."""

    type: str
    severity: str
    subject: str
    message: str
    server_id: int | None = None
    node_id: int | None = None
    cluster_id: int | None = None
    details: dict = field(default_factory=dict)


def _model_fits(label: str, gpu_names: Iterable[str]) -> bool:
    """A scheduler's GPU name (GFD product label, Slurm GRES type) agrees with one of the
    agent's NVML names."""
    return any(gpu_models_agree(label, name) for name in gpu_names)


def _node_label(node: dict, clusters: dict) -> str:
    return f"{node['name']} ({clusters[node['cluster_id']]['name']})"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def findings_for(nodes, servers, clusters, ambiguous, now) -> dict[tuple[str, str], Desired]:
    desired: dict[tuple[str, str], Desired] = {}

    def add(d: Desired) -> None:
        desired[(d.type, d.subject)] = d

    stale_before = now - timedelta(seconds=settings.ATLAS_SERVER_STALE_AFTER_S)
    nodes_by_server: dict[int, list[dict]] = defaultdict(list)
    for node in nodes:
        if node["server_id"]:
            nodes_by_server[node["server_id"]].append(node)

    for node in nodes:
        label = _node_label(node, clusters)
        cluster_name = clusters[node["cluster_id"]]["name"]
        subject = f"node:{node['id']}"
        scheduler = "Kubernetes" if node["kind"] == ClusterKind.KUBERNETES else "Slurm"
        server = servers.get(node["server_id"])
        if server is None:
            if node["id"] in ambiguous:
                names = sorted(servers[i].hostname for i in ambiguous[node["id"]])
                add(
                    Desired(
                        FindingType.DUPLICATE_IDENTITY,
                        Severity.WARNING,
                        subject,
                        f"{label}: its identity matches {len(names)} servers ({', '.join(names)}); "
                        "bind it by hand or fix the duplicate hostname or address",
                        node_id=node["id"],
                        cluster_id=node["cluster_id"],
                        details={"servers": names},
                    )
                )
            else:
                add(
                    Desired(
                        FindingType.NODE_WITHOUT_SERVER,
                        Severity.WARNING if node["gpu_capacity"] else Severity.INFO,
                        subject,
                        f"{label}: {scheduler} node with {_plural(node['gpu_capacity'], 'GPU')} "
                        "and no "
                        "agent report from its server (no server with its system UUID, machine-id, "
                        "name or address); install the agent or bind it by hand",
                        node_id=node["id"],
                        cluster_id=node["cluster_id"],
                    )
                )
            continue
        _node_gpu_findings(node, server, label, scheduler, add)
        base = dict(server_id=server.id, node_id=node["id"], cluster_id=node["cluster_id"])
        problems = server.health_problems()
        if (
            node["schedulable"]
            and node["ready"]
            and server.last_seen
            and server.last_seen < stale_before
        ):
            add(
                Desired(
                    FindingType.STALE_AGENT,
                    Severity.WARNING,
                    subject,
                    f"{label}: the node is ready and schedulable but the agent on "
                    f"{server.hostname} "
                    f"last reported {server.last_seen:%Y-%m-%d %H:%M} UTC; "
                    "its hardware facts may be old",
                    **base,
                )
            )
        if problems and node["schedulable"]:
            critical = CRITICAL_PROBLEMS & set(server.problem_counts())
            add(
                Desired(
                    FindingType.UNHEALTHY_GPU,
                    Severity.CRITICAL if critical else Severity.WARNING,
                    subject,
                    f"{label}: schedulable, but {server.hostname} has {'; '.join(problems)}; "
                    "drain it before jobs land on a bad GPU",
                    details={"problems": problems, "gpus": sorted(server.unhealthy)},
                    **base,
                )
            )
        if (
            not (node["ready"] and node["schedulable"])
            and not problems
            and (server.last_seen and server.last_seen >= stale_before)
        ):
            why = node["reason"] or ", ".join(node["state_flags"] or []) or node["state"]
            add(
                Desired(
                    FindingType.NODE_UNAVAILABLE,
                    Severity.INFO,
                    subject,
                    f"{label}: {node['raw_state'] or node['state']} in {cluster_name} ({why}), "
                    "while the hardware of "
                    f"{server.hostname} looks healthy: {_plural(server.gpus, 'GPU')} idle",
                    **base,
                )
            )

    _server_findings(servers, nodes_by_server, bool(clusters), add)
    _cluster_findings(nodes, servers, clusters, add)
    _duplicate_findings(servers, nodes, clusters, add)
    _profile_findings(servers, nodes_by_server, add)
    _duplicate_gpu_findings(servers, now, add)
    return desired


def _node_gpu_findings(node, server: ServerFacts, label: str, scheduler: str, add) -> None:
    base = dict(server_id=server.id, node_id=node["id"], cluster_id=node["cluster_id"])
    subject = f"node:{node['id']}"
    agent = f"the server has {server.gpus}" + (
        f" ({server.mig_gpus} in MIG mode, {_plural(server.mig_devices, 'MIG device')})"
        if server.mig_gpus
        else ""
    )
    if server.nvml_error and not server.gpus:
        agent = f"the agent sees none (NVML: {server.nvml_error})"
    if node["kind"] == ClusterKind.KUBERNETES:
        _kubernetes_counts(node, server, label, agent, subject, base, add)
    else:
        _slurm_counts(node, server, label, agent, subject, base, add)

    if server.names:
        product = node["gpu_product"]
        if node["kind"] == ClusterKind.SLURM:
            types = [
                g.get("type")
                for g in node["gres"] or []
                if g.get("name") == "gpu" and g.get("type") and not g.get("mig_profile")
            ]
            wrong = [t for t in types if not _model_fits(t, server.names)]
            product = ", ".join(wrong) if wrong else ""
        if product and not _model_fits(product, server.names):
            add(
                Desired(
                    FindingType.GPU_MODEL_MISMATCH,
                    Severity.WARNING,
                    subject,
                    f"{label}: {scheduler} says the GPUs are {product}; the agent reports "
                    f"{', '.join(sorted(server.names))}",
                    details={"scheduler": product, "agent": sorted(server.names)},
                    **base,
                )
            )


def _kubernetes_counts(node, server: ServerFacts, label, agent, subject, base, add) -> None:
    resources = node["resources"] or {}
    replicas = max(node["gpu_replicas"] or 1, 1)
    shared = resources.get(SHARED_GPU_RESOURCE)
    advertised = node["gpu_capacity"]
    allocatable = node["gpu_allocatable"]
    resource = "nvidia.com/gpu"
    if shared and not advertised:  # time-slicing with renameByDefault: nvidia.com/gpu.shared
        advertised, allocatable = shared.get("capacity", 0), shared.get("allocatable", 0)
        resource = SHARED_GPU_RESOURCE
    mig_resources = {
        normalize_mig_profile(k) or k: v for k, v in (node["mig_resources"] or {}).items()
    }
    strategy = (node["mig_strategy"] or "").lower()
    if not strategy:
        strategy = "mixed" if mig_resources else ("single" if server.mig_gpus else "none")
    if strategy == "single" and server.mig_gpus:
        expected, what = (
            server.mig_devices,
            f"{_plural(server.mig_devices, 'MIG device')} (MIG strategy single)",
        )
    elif strategy == "mixed":
        expected, what = server.whole_gpus, f"{_plural(server.whole_gpus, 'GPU')} outside MIG mode"
    else:
        expected, what = server.gpus, _plural(server.gpus, "GPU")
    expected *= replicas
    if replicas > 1:
        what += f", x{replicas} time-slicing replicas"

    if not advertised and not node["gpu_capacity"] and expected and not mig_resources:
        add(
            Desired(
                FindingType.GPU_COUNT_MISMATCH,
                Severity.WARNING,
                subject,
                f"{label}: Kubernetes advertises no nvidia.com/gpu; {agent}. Is the NVIDIA device "
                "plugin running on this node?",
                details={"advertised": 0, "expected": expected},
                **base,
            )
        )
    elif advertised != expected:
        hint = ""
        if advertised > expected and server.lost:
            hint = f"; {_plural(server.lost, 'GPU')} lost since the device plugin last counted"
        add(
            Desired(
                FindingType.GPU_COUNT_MISMATCH,
                Severity.WARNING,
                subject,
                f"{label}: Kubernetes advertises {advertised} {resource}, expected {expected} from "
                f"{what}; {agent}{hint}",
                details={"advertised": advertised, "expected": expected, "agent_gpus": server.gpus},
                **base,
            )
        )
    elif allocatable < advertised:
        missing = advertised - allocatable
        add(
            Desired(
                FindingType.GPU_COUNT_MISMATCH,
                Severity.WARNING,
                subject,
                f"{label}: Kubernetes advertises {advertised} {resource} but only {allocatable} "
                f"allocatable; {agent}. The device plugin may have marked {missing} unhealthy "
                "(an Xid error?)",
                details={
                    "capacity": advertised,
                    "allocatable": allocatable,
                    "agent_gpus": server.gpus,
                },
                **base,
            )
        )
    if strategy == "mixed" and (mig_resources or server.mig_devices):
        scheduler = Counter({k: v for k, v in mig_resources.items() if v})
        if scheduler != server.mig_profiles:
            add(_mig_mismatch(label, "Kubernetes", scheduler, server, subject, base))


def _slurm_counts(node, server: ServerFacts, label, agent, subject, base, add) -> None:
    gres = [g for g in node["gres"] or [] if g.get("name") == "gpu"]
    whole = sum(g.get("count") or 0 for g in gres if not g.get("mig_profile"))
    mig = Counter()
    for g in gres:
        profile = normalize_mig_profile(g.get("mig_profile"))
        if profile:
            mig[profile] += g.get("count") or 0
    total = node["gpu_capacity"]
    if not gres and server.gpus:
        add(
            Desired(
                FindingType.GPU_COUNT_MISMATCH,
                Severity.WARNING,
                subject,
                f"{label}: Slurm has no gpu GRES for this node; {agent}. Add Gres=gpu:... to its "
                "NodeName line (and gres.conf)",
                details={"gres": 0, "agent_gpus": server.gpus},
                **base,
            )
        )
        return
    if whole == server.whole_gpus and mig == server.mig_profiles:
        return
    if server.mig_gpus and not mig and total == server.gpus:
        add(
            Desired(
                FindingType.MIG_MISMATCH,
                Severity.WARNING,
                subject,
                f"{label}: Slurm counts {_plural(server.mig_gpus, 'MIG-enabled GPU')} "
                "as whole GPUs; "
                f"the agent reports {_plural(server.mig_devices, 'MIG device')} on them "
                f"({_profile_text(server.mig_profiles)}); configure MIG GRES",
                details={"gres": node["gres"], "agent_mig": dict(server.mig_profiles)},
                **base,
            )
        )
        return
    if mig or server.mig_devices:
        if mig != server.mig_profiles:
            add(_mig_mismatch(label, "Slurm", mig, server, subject, base))
        if whole == server.whole_gpus:
            return
    add(
        Desired(
            FindingType.GPU_COUNT_MISMATCH,
            Severity.WARNING,
            subject,
            f"{label}: Slurm's Gres says {_plural(total, 'GPU')}"
            + (f" ({whole} whole)" if mig else "")
            + f"; {agent}"
            + (" - not in Slurm's config?" if whole < server.whole_gpus else ""),
            details={"gres": total, "whole": whole, "agent_gpus": server.gpus},
            **base,
        )
    )


def _profile_text(profiles: Counter) -> str:
    return ", ".join(f"{n}x {p}" for p, n in sorted(profiles.items())) or "none"


def _mig_mismatch(label, scheduler, counts: Counter, server: ServerFacts, subject, base) -> Desired:
    return Desired(
        FindingType.MIG_MISMATCH,
        Severity.WARNING,
        subject,
        f"{label}: {scheduler} offers MIG {_profile_text(counts)}; the agent reports "
        f"{_profile_text(server.mig_profiles)}"
        + (" (MIG re-layout not yet seen by the scheduler?)" if server.mig_devices else ""),
        details={"scheduler": dict(counts), "agent": dict(server.mig_profiles)},
        **base,
    )


def _server_findings(servers, nodes_by_server, any_cluster: bool, add) -> None:
    hosts_with_bound_vms = {
        s.physical_host_id
        for s in servers.values()
        if s.physical_host_id and s.id in nodes_by_server
    }
    for s in servers.values():
        subject = f"server:{s.id}"
        if s.pci_gpu_count is not None and s.pci_gpu_count > s.gpus:
            missing = s.pci_gpu_count - s.gpus
            add(
                Desired(
                    FindingType.GPU_NOT_IN_NVML,
                    Severity.CRITICAL,
                    subject,
                    f"{s.hostname}: {_plural(s.pci_gpu_count, 'GPU')} on the PCI bus, NVML sees "
                    f"{s.gpus}: {missing} fell off the bus or lack a driver "
                    "(check dmesg for Xid 79)",
                    server_id=s.id,
                    details={"pci": s.pci_gpu_count, "nvml": s.gpus},
                )
            )
        if s.mig_pending:
            add(
                Desired(
                    FindingType.MIG_PENDING_REBOOT,
                    Severity.INFO,
                    subject,
                    f"{s.hostname}: MIG mode changes on {_plural(s.mig_pending, 'GPU')} "
                    "at the next "
                    "GPU reset or reboot; schedulers still see the old layout",
                    server_id=s.id,
                )
            )
        if (
            any_cluster
            and s.gpus
            and s.id not in nodes_by_server
            and s.id not in hosts_with_bound_vms
        ):
            add(
                Desired(
                    FindingType.SERVER_WITHOUT_NODE,
                    Severity.WARNING,
                    subject,
                    f"{s.hostname}: {_plural(s.gpus, 'GPU')} in no scheduler: no Kubernetes or "
                    "Slurm node binds to this server",
                    server_id=s.id,
                )
            )


def _cluster_findings(nodes, servers, clusters, add) -> None:
    drivers: dict[int, Counter] = defaultdict(Counter)
    cudas: dict[int, Counter] = defaultdict(Counter)
    for node in nodes:
        server = servers.get(node["server_id"])
        if server and server.gpus:
            if server.driver_version:
                drivers[node["cluster_id"]][server.driver_version] += 1
            if server.cuda_version:
                cudas[node["cluster_id"]][server.cuda_version] += 1
    for label, table in (("driver", drivers), ("CUDA", cudas)):
        for cluster_id, versions in table.items():
            if len(versions) < 2:
                continue
            name = clusters[cluster_id]["name"]
            listed = ", ".join(f"{v} on {_plural(n, 'server')}" for v, n in versions.most_common())
            add(
                Desired(
                    FindingType.DRIVER_SKEW,
                    Severity.WARNING,
                    f"cluster:{cluster_id}:{label.lower()}",
                    f"{name}: {len(versions)} NVIDIA {label} versions in one cluster ({listed}); "
                    "jobs may behave differently by node",
                    cluster_id=cluster_id,
                    details={"versions": dict(versions)},
                )
            )


def _duplicate_findings(servers, nodes, clusters, add) -> None:
    by_mid: dict[str, list[ServerFacts]] = defaultdict(list)
    by_name: dict[str, list[ServerFacts]] = defaultdict(list)
    for s in servers.values():
        if s.machine_id:
            by_mid[s.machine_id].append(s)
        by_name[short_hostname(s.hostname)].append(s)
    for mid, group in by_mid.items():
        if len(group) > 1:
            names = sorted(s.hostname for s in group)
            add(
                Desired(
                    FindingType.DUPLICATE_IDENTITY,
                    Severity.WARNING,
                    f"machine-id:{mid}",
                    f"{', '.join(names)} share the machine-id {mid}: a cloned image? Regenerate "
                    "/etc/machine-id, or Kubernetes nodes may bind to the wrong server",
                    server_id=group[0].id,
                    details={"servers": names},
                )
            )
    for name, group in by_name.items():
        if len(group) > 1 and name:
            add(
                Desired(
                    FindingType.DUPLICATE_IDENTITY,
                    Severity.WARNING,
                    f"hostname:{name}",
                    f"{len(group)} servers report the hostname {name}; "
                    "Slurm nodes cannot tell them "
                    "apart",
                    server_id=group[0].id,
                    details={"servers": sorted(s.id for s in group)},
                )
            )
    seen: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for node in nodes:
        if node["server_id"]:
            seen[(node["cluster_id"], node["server_id"])].append(node)
    for (cluster_id, server_id), group in seen.items():
        if len(group) > 1:
            names = sorted(n["name"] for n in group)
            add(
                Desired(
                    FindingType.DUPLICATE_IDENTITY,
                    Severity.WARNING,
                    f"cluster:{cluster_id}:server:{server_id}",
                    f"{clusters[cluster_id]['name']}: nodes {', '.join(names)} all bind to "
                    f"{servers[server_id].hostname}; one server should be one node per cluster "
                    "(VMs report their own UUIDs)",
                    server_id=server_id,
                    cluster_id=cluster_id,
                    details={"nodes": names},
                )
            )


def _duplicate_gpu_findings(servers, now, add) -> None:
    """A server whose report lists GPUs (or MIG devices) another live server still reports.

    The holder keeps them (an agent writes only its own server) until its own report drops
    them or it goes offline; the finding lasts while both servers are live and claim them.
    """
    offline_before = now - timedelta(seconds=settings.ATLAS_SERVER_OFFLINE_AFTER_S)

    def live(s: ServerFacts | None) -> bool:
        return s is not None and s.last_seen is not None and s.last_seen >= offline_before

    for s in servers.values():
        by_holder: dict[int, list[dict]] = defaultdict(list)
        for claim in s.gpu_claims:
            by_holder[claim["holder_id"]].append(claim)
        for holder_id, claims in sorted(by_holder.items()):
            holder = servers.get(holder_id)
            if not (live(s) and live(holder)):
                continue
            gpus = [c for c in claims if not c["mig_device_id"]]
            migs = [c for c in claims if c["mig_device_id"]]
            named = [f"serial {c['serial']}" if c["serial"] else c["uuid"] for c in gpus]
            named += [c["uuid"] for c in migs]
            more = f" and {len(named) - 3} more" if len(named) > 3 else ""
            listed = ", ".join(named[:3]) + more
            what = " and ".join(
                part
                for part in (
                    _plural(len(gpus), "GPU") if gpus else "",
                    _plural(len(migs), "MIG device") if migs else "",
                )
                if part
            )
            add(
                Desired(
                    FindingType.DUPLICATE_GPU,
                    Severity.WARNING,
                    f"server:{s.id}:gpus-of:{holder_id}",
                    f"{s.hostname} reports {what} that {holder.hostname} also reports "
                    f"({listed}); they stay with {holder.hostname} until its own report no "
                    "longer lists them or it goes offline. If both keep reporting them, one "
                    "agent describes another machine (a copied token or disk image, or saved "
                    "nvidia-smi files of another server)",
                    server_id=s.id,
                    details={
                        "claimant": s.hostname,
                        "holder": holder.hostname,
                        "uuids": sorted(c["uuid"] for c in claims),
                    },
                )
            )


def _profile_findings(servers, nodes_by_server, add) -> None:
    profiles = list(HardwareProfile.objects.all())
    if not profiles:
        return
    for s in servers.values():
        profile = hardware_profile_for(
            vendor=s.vendor, product=s.product, profile_id=s.profile_id, profiles=profiles
        )
        if profile is None:
            continue
        expected = profile.expected_gpu_count
        sides = {"NVML": s.gpus}
        if s.pci_gpu_count is not None:
            sides["PCI bus"] = s.pci_gpu_count
        for node in nodes_by_server.get(s.id, []):
            if node["kind"] == ClusterKind.KUBERNETES:
                if not node["mig_resources"] and not (node["gpu_replicas"] or 1) > 1:
                    sides[f"Kubernetes allocatable ({node['name']})"] = node["gpu_allocatable"]
            elif not any(g.get("mig_profile") for g in node["gres"] or []):
                sides[f"Slurm GRES ({node['name']})"] = node["gpu_capacity"]
        short = {k: v for k, v in sides.items() if v < expected}
        if not short:
            continue
        causes = []
        pci = sides.get("PCI bus")
        if pci is not None and pci >= expected and s.gpus < expected:
            causes.append("on the PCI bus but not in NVML: fell off the bus or driver not bound")
        elif pci is not None and pci < expected:
            causes.append("missing from the PCI bus: seated badly, dead, or removed")
        if any(k.startswith("Kubernetes") for k in short) and s.gpus >= expected:
            causes.append(
                "NVML sees them, Kubernetes does not: marked unhealthy by the device plugin"
            )
        if any(k.startswith("Slurm") for k in short) and s.gpus >= expected:
            causes.append("NVML sees them, Slurm does not: not in Slurm's config")
        if s.mig_gpus:
            causes.append("MIG re-layout may change how schedulers count")
        listed = ", ".join(f"{k} {v}" for k, v in sides.items())
        add(
            Desired(
                FindingType.BELOW_PROFILE,
                Severity.CRITICAL if s.gpus < expected else Severity.WARNING,
                f"server:{s.id}",
                f"{s.hostname}: profile {profile.name} expects {_plural(expected, 'GPU')}"
                + (f" ({profile.expected_gpu_model})" if profile.expected_gpu_model else "")
                + f"; {listed}"
                + (f". Likely: {'; '.join(causes)}" if causes else ""),
                server_id=s.id,
                details={"expected": expected, "sides": sides, "short": sorted(short)},
            )
        )
        if (
            profile.expected_gpu_model
            and s.names
            and not _model_fits(profile.expected_gpu_model, s.names)
        ):
            add(
                Desired(
                    FindingType.GPU_MODEL_MISMATCH,
                    Severity.WARNING,
                    f"server:{s.id}:profile",
                    f"{s.hostname}: profile {profile.name} expects "
                    f"{profile.expected_gpu_model}; the "
                    f"agent reports {', '.join(sorted(s.names))}",
                    server_id=s.id,
                )
            )
