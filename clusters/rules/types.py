"""The facts the finding rules read, and the finding facts they return.

Plain frozen values, built by `clusters.reconcile` from a fixed number of queries: a rule
never queries, so each one is tested on hand-built facts without a database. What the rules
return is `findings.facts.FindingFact`, the shape shared with `health.rules` and `fabric.rules`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import NamedTuple

from clusters.parsers.records import GresRecord
from inventory.health import PROBLEMS, GpuHealth, GpuProblem


class ResourceCount(NamedTuple):
    """A Kubernetes extended resource: what the node has and what pods may take."""

    capacity: int
    allocatable: int


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """A scheduler node as the rules see it, after binding (`server_id`, `binding_method`).

    `gpu_replicas` is at least 1; `mig_resources` are counts by normalised MIG profile
    (`1g.10gb`); `shared_gpus` is `nvidia.com/gpu.shared` (time-slicing with
    renameByDefault), None when the node does not advertise it; `mig_strategy` is lower-case,
    empty when no label says.
    """

    id: int
    cluster_id: int
    cluster: str
    kind: str
    name: str
    state: str
    raw_state: str = ""
    state_flags: tuple[str, ...] = ()
    ready: bool = True
    schedulable: bool = True
    reason: str = ""
    gpu_capacity: int = 0
    gpu_allocatable: int = 0
    gpu_used: int | None = None
    gres: tuple[GresRecord, ...] = ()
    mig_resources: Mapping[str, int] = field(default_factory=dict)
    shared_gpus: ResourceCount | None = None
    gpu_product: str = ""
    gpu_replicas: int = 1
    mig_strategy: str = ""
    hostname: str = ""
    addresses: tuple[str, ...] = ()
    system_uuid: str | None = None
    machine_id: str | None = None
    server_id: int | None = None
    binding_method: str = ""

    @property
    def label(self) -> str:
        """`gpu007 (hpc)`: how messages name a node."""
        return f"{self.name} ({self.cluster})"

    @property
    def subject(self) -> str:
        return f"node:{self.id}"

    @property
    def gpu_gres(self) -> tuple[GresRecord, ...]:
        """The node's `gpu` GRES (Slurm), typed or not, MIG-typed included."""
        return tuple(g for g in self.gres if g.name == "gpu")


@dataclass(frozen=True, slots=True)
class ClaimedGpu:
    """A GPU (or MIG device) this server's report lists that another server holds."""

    holder_id: int
    uuid: str
    serial: str = ""
    mig_device_id: int | None = None


@dataclass(frozen=True, slots=True)
class ServerFacts:
    """A server as its agent last described it, with its GPUs counted.

    GPU counts leave lost GPUs out: `gpus` are the GPUs NVML sees, `mig_gpus` those in MIG
    mode, `mig_pending` those whose MIG mode changes at the next reset. `names` are the NVML
    names of its GPUs, `mig_profiles` its MIG devices by normalised profile, `unhealthy` its
    unhealthy GPUs by UUID with their reasons (`inventory.health`, the one rule). `rack` and
    `rack_position` (the lowest unit it takes) are where people say it stands.
    `declared_kubernetes_node` and `declared_slurm_node` are the nodes its agent says it is
    (empty: none declared).
    """

    id: int
    hostname: str
    fqdn: str = ""
    system_uuid: str | None = None
    machine_id: str | None = None
    addresses: tuple[str, ...] = ()
    last_seen: datetime | None = None
    driver_version: str = ""
    cuda_version: str = ""
    vendor: str = ""
    product: str = ""
    profile_id: int | None = None
    pci_gpu_count: int | None = None
    is_virtual: bool = False
    physical_host_id: int | None = None
    nvml_error: str = ""
    rack: str = ""
    rack_position: int | None = None
    declared_kubernetes_node: str = ""
    declared_slurm_node: str = ""
    gpus: int = 0
    mig_gpus: int = 0
    mig_pending: int = 0
    names: frozenset[str] = frozenset()
    mig_profiles: Counter[str] = field(default_factory=Counter)
    gpu_claims: tuple[ClaimedGpu, ...] = ()
    unhealthy: Mapping[str, GpuHealth] = field(default_factory=dict)

    @property
    def subject(self) -> str:
        return f"server:{self.id}"

    @property
    def mig_devices(self) -> int:
        return sum(self.mig_profiles.values())

    @property
    def whole_gpus(self) -> int:
        """GPUs outside MIG mode."""
        return self.gpus - self.mig_gpus

    @property
    def lost(self) -> int:
        return self.problem_counts()[GpuProblem.LOST]

    def problem_counts(self) -> Counter[str]:
        """GPUs per reason; a GPU with two reasons counts under both."""
        return Counter(r for health in self.unhealthy.values() for r in health.reasons)

    def health_problems(self) -> list[str]:
        """`2 GPU(s) lost`, one line per reason, the most serious first."""
        counts = self.problem_counts()
        return [f"{counts[p]} GPU(s) {PROBLEM_TEXT[p]}" for p in PROBLEMS if counts[p]]


PROBLEM_TEXT = {
    GpuProblem.LOST: "lost",
    GpuProblem.NVML_ERROR: "failing NVML queries",
    GpuProblem.ROW_REMAP_FAILED: "with a failed row remap",
    GpuProblem.RESET_PENDING: "with page retirement/row remap pending a reset",
    GpuProblem.UNCORRECTED_ECC: "with uncorrected ECC errors",
}
"""How an unhealthy-GPU finding counts each reason: `2 GPU(s) lost`."""


@dataclass(frozen=True, slots=True)
class HardwareProfileFacts:
    """What a kind of server should hold (`inventory.HardwareProfile`)."""

    id: int
    name: str
    expected_gpu_count: int
    expected_gpu_model: str = ""


@dataclass(frozen=True)
class Fleet:
    """Everything the rules read: nodes (bound), servers by id, cluster names by id, nodes
    whose identity matched several servers, each server's hardware profile, and the times
    that make an agent stale (`stale_before`) or a server offline (`offline_before`)."""

    nodes: tuple[NodeFacts, ...]
    servers: Mapping[int, ServerFacts]
    now: datetime
    stale_before: datetime
    offline_before: datetime
    clusters: Mapping[int, str] = field(default_factory=dict)
    ambiguous: Mapping[int, frozenset[int]] = field(default_factory=dict)
    profiles: Mapping[int, HardwareProfileFacts] = field(default_factory=dict)
    """The hardware profile of each server that has one, by server id."""

    @cached_property
    def nodes_by_server(self) -> Mapping[int, tuple[NodeFacts, ...]]:
        """The nodes bound to each server."""
        grouped: dict[int, list[NodeFacts]] = defaultdict(list)
        for node in self.nodes:
            if node.server_id:
                grouped[node.server_id].append(node)
        return {server_id: tuple(group) for server_id, group in grouped.items()}

    @cached_property
    def bound(self) -> tuple[tuple[NodeFacts, ServerFacts], ...]:
        """Each node bound to a server, with its server (the pairs most rules judge)."""
        servers = self.servers
        return tuple(
            (node, servers[node.server_id])
            for node in self.nodes
            if node.server_id and node.server_id in servers
        )

    def server_of(self, node: NodeFacts) -> ServerFacts | None:
        return self.servers.get(node.server_id) if node.server_id else None

    def is_stale(self, server: ServerFacts) -> bool:
        """The agent reported, but not since `stale_before`."""
        return bool(server.last_seen and server.last_seen < self.stale_before)

    def is_fresh(self, server: ServerFacts) -> bool:
        return bool(server.last_seen and server.last_seen >= self.stale_before)

    def is_live(self, server: ServerFacts | None) -> bool:
        """Not offline: it reported since `offline_before`."""
        return (
            server is not None
            and server.last_seen is not None
            and (server.last_seen >= self.offline_before)
        )
