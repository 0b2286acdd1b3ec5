"""The shapes of a placement: the request as given, as each scheduler reads it, its filters, the
ranking of a node, and the answer's rows. Plain values and pure functions only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from agent.mig import normalize_mig_profile
from clusters.choices import ClusterKind


class PlacementRequestError(ValueError):
    """A request that cannot be read as a scheduler request; `field` names the parameter."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Filters:
    """What a node's GPUs must be, whatever the request's shape."""

    model: str | None = None
    mig_profile: str | None = None
    nvlink_only: bool = False
    min_gpu_memory_bytes: int | None = None
    partition: str | None = None
    same_numa: bool = False

    @classmethod
    def of(cls, request: Filters) -> Filters:
        """The filters of a request (a PlacementRequest is its filters and a shape)."""
        return cls(**{f.name: getattr(request, f.name) for f in fields(cls)})


@dataclass(frozen=True)
class PlacementRequest(Filters):
    """A placement request as given (before it is shaped for a cluster's kind): its filters,
    the cluster, and the GPUs, nodes and GPUs per node asked for."""

    cluster: str | None = None
    gpus: int | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    mix_models: bool = False
    """Allow GPUs of several models in one job (off: one model per job where one fits)."""
    scheduler: str | None = None
    """The scheduler the request is for (a `ClusterKind`): a Kubernetes pod request considers
    Kubernetes clusters only, a Slurm job Slurm clusters only; None: every cluster."""

    def as_params(self) -> dict[str, Any]:
        """The API query parameters that ask this request again."""
        params: dict[str, Any] = {
            "cluster": self.cluster,
            "gpus": self.gpus,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "model": self.model,
            "mig_profile": self.mig_profile,
            "nvlink_only": self.nvlink_only or None,
            "min_gpu_memory": self.min_gpu_memory_bytes,
            "partition": self.partition,
            "same_numa": self.same_numa or None,
            "mix_models": self.mix_models or None,
            "scheduler": self.scheduler,
        }
        return {k: v for k, v in params.items() if v not in (None, "")}


@dataclass(frozen=True)
class Shape:
    """A request shaped for one kind of cluster: `count` nodes x `per_node` GPUs, or a spread.

    `spread` (Slurm `--gpus=N`): `total` GPUs over as few nodes as possible.
    """

    total: int
    count: int | None = None
    per_node: int | None = None
    spread: bool = False

    def describe(self, kind: str, mig_profile: str | None) -> str:
        unit = f"MIG {mig_profile} device" if mig_profile else "GPU"
        if self.spread:
            return f"{self.total} {unit}s over as few nodes as possible"
        if self.count == 1 and kind == ClusterKind.KUBERNETES:
            return f"one pod with {self.per_node} {unit}(s) on one node"
        return f"{self.count} node(s) x {self.per_node} {unit}(s)"


def request_shape(request: PlacementRequest, kind: str) -> Shape:
    """The request as the cluster's scheduler reads it; raises PlacementRequestError."""
    gpus, count, per_node = request.gpus, request.nodes, request.gpus_per_node
    for name, value in (("gpus", gpus), ("nodes", count), ("gpus_per_node", per_node)):
        if value is not None and value < 1:
            raise PlacementRequestError(name, "must be at least 1")
    if request.mig_profile and gpus is None and per_node is None:
        gpus = 1
    if count and per_node:
        if gpus is not None and gpus != count * per_node:
            raise PlacementRequestError("gpus", "gpus must equal nodes x gpus_per_node")
        return Shape(total=count * per_node, count=count, per_node=per_node)
    if per_node:
        if gpus is None:
            return Shape(total=per_node, count=1, per_node=per_node)
        if gpus % per_node:
            raise PlacementRequestError("gpus", "gpus must be a multiple of gpus_per_node")
        return Shape(total=gpus, count=gpus // per_node, per_node=per_node)
    if gpus is None:
        raise PlacementRequestError("gpus", "give gpus, or nodes and gpus_per_node")
    if count:
        if gpus % count:
            raise PlacementRequestError("gpus", "gpus must be a multiple of nodes")
        return Shape(total=gpus, count=count, per_node=gpus // count)
    if kind == ClusterKind.SLURM and not request.mig_profile:
        return Shape(total=gpus, spread=True)
    return Shape(total=gpus, count=1, per_node=gpus)


MIG_SLICES_RE = re.compile(r"\s*(?:mig[-_ ]?)?((?:\d+c\.)?\d+g)\.?\s*", re.IGNORECASE)
"""A MIG request by compute slices alone (`1g`, `MIG 1g`, `1c.3g`): any profile of that shape."""


def mig_profile_text(value: str) -> str:
    """What a request's `mig_profile` asks: one profile (`1G.10GB`, `mig-1g.10gb` ->
    `1g.10gb`) or every profile of some compute slices (`1g` -> `1g`, which takes `1g.5gb`,
    `1g.10gb`, `1g.20gb`...: `mig_profile_matches`); raises PlacementRequestError."""
    exact = normalize_mig_profile(value)
    if exact:
        return exact
    slices = MIG_SLICES_RE.fullmatch(value or "")
    if slices:
        return slices.group(1).lower()
    raise PlacementRequestError(
        "mig_profile", "a MIG profile such as 1g.10gb or 3g.40gb, or its slices alone: 1g"
    )


def mig_profile_is_prefix(asked: str | None) -> bool:
    """`1g` (any 1g profile), not `1g.10gb`."""
    return bool(asked) and not (asked or "").endswith("gb")


def mig_slices(profiles: list[str]) -> list[str]:
    """The compute slices of profiles (`1g.10gb`, `1g.20gb`, `1c.3g.40gb` -> `1c.3g`, `1g`):
    what a form offers beside the profiles themselves, by slices."""
    found = {m.group(0).rsplit(".", 1)[0] for p in profiles if (m := _SLICES_OF.match(p))}
    return sorted(found, key=lambda s: (len(s), s))


_SLICES_OF = re.compile(r"(?:\d+c\.)?\d+g\.\d+gb")


def mig_profile_matches(asked: str, profile: str) -> bool:
    """Whether a profile of the fleet (`1g.10gb`, `1g.10gb+me`) answers a request's `asked`
    (`mig_profile_text`): the same profile, or one of the compute slices asked (`1g`)."""
    profile = profile.lower()
    if mig_profile_is_prefix(asked):
        return profile.startswith(f"{asked}.")
    return profile == asked


def gpu_memory_text(value: str) -> int:
    """`80GB`, `80G`, `40gib`, `81920MiB` or bytes -> bytes; raises PlacementRequestError."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*", value.lower())
    if not match:
        raise PlacementRequestError("min_gpu_memory", "a size such as 40GB, 80GiB or bytes")
    number, unit = float(match.group(1)), (match.group(2) or "").rstrip("b").rstrip("i")
    factor = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[unit]
    if unit == "" and number < 4096:
        factor = 2**30  # "80" means 80 GiB: nobody asks for a GPU with 80 bytes
    return int(number * factor)


class Ranking(NamedTuple):
    """How well a node takes its share of a request; lower is better, field by field."""

    link_rank: int
    """The worst link among the GPUs chosen (`link_rank`: NV18 < PIX < SYS < unknown)."""
    numa_nodes: int
    leftover: int
    """Free GPUs the node keeps: the tightest fit first, so big nodes stay free."""
    nic_missing: int
    """GPUs chosen without a NIC at PIX distance."""
    in_use_unknown: bool
    """The scheduler does not say which GPUs are busy: the set chosen may be taken."""
    cluster: str
    node: str


class PlanRank(NamedTuple):
    """How well a cluster takes the whole request; lower is better."""

    nodes: int
    worst_link_rank: int
    leftover: int
    cluster: str


# The answer -----------------------------------------------------------------------------


@dataclass
class GpuChoice:
    index: int
    uuid: str
    numa_node: int | None
    mig_uuid: str | None = None
    mig_profile: str | None = None
    gpu_id: int | None = None
    """The GPU's row id, for its page (`gpu-detail`)."""


@dataclass
class NodeChoice:
    """One node of an answer: the GPUs taken there and how they are wired."""

    node: str
    node_id: int
    cluster: str
    kind: str
    server: int | None
    server_hostname: str | None
    gpu_count: int
    free_gpus: int
    gpus: list[GpuChoice] = field(default_factory=list)
    link_class: str | None = None
    numa_nodes: list[int] = field(default_factory=list)
    nics: list[str] = field(default_factory=list)
    in_use_known: bool = True
    critical_findings: int = 0
    """Open critical findings on the node or its server: why it was ranked last."""
    gpus_needing_action: int = 0
    """GPUs of its server skipped because they need action (`health.selectors`)."""


@dataclass(slots=True)
class BlockedNode:
    node: str
    node_id: int
    cluster: str
    kind: str
    server: int | None
    reason: str
    detail: str
    gpus_needing_action: int = 0
    filled_by: list[str] = field(default_factory=list)
    """The running workloads holding its GPUs, in words (`job 5679 (alice, 8 GPUs)`): who
    fills a node the answer passed over (`service.name_holders`)."""
    twins: list[tuple] = field(default_factory=list)
    """Nodes blocked alike (the twins of the node, `FleetNode.twins`): counted with it and
    listed by `members`."""

    @property
    def reason_text(self) -> str:
        return reason_text(self.reason)

    @property
    def weight(self) -> int:
        return 1 + len(self.twins)

    def members(self, limit: int) -> list[BlockedNode]:
        """Itself and its twins, each a row of its own, the first `limit` by name."""
        return [self] + [
            BlockedNode(
                node=name,
                node_id=node_id,
                cluster=self.cluster,
                kind=self.kind,
                server=server_id,
                reason=self.reason,
                detail=self.detail,
                gpus_needing_action=self.gpus_needing_action,
            )
            for node_id, name, server_id, _ in self.twins[: limit - 1]
        ]


REASON_TEXT = {
    "not_ready": "not ready",
    "not_schedulable": "drained or cordoned",
    "unhealthy_gpu": "unhealthy or lost GPUs",
    "needs_action": "GPUs needing action (drain, reset or RMA)",
    "mig_layout": "another MIG layout",
    "in_use": "GPUs busy",
    "too_small": "too few free GPUs on one node",
    "nvlink": "no NVLink-connected set of GPUs",
    "numa": "too few GPUs on one NUMA node",
    "memory": "too little GPU memory",
    "model": "another GPU model",
}
"""Why a node is left out, in words: the one mapping from code to text (page and API)."""


def reason_text(code: str) -> str:
    return REASON_TEXT.get(code, code.replace("_", " "))


@dataclass(slots=True)
class NeedingAction:
    """A node whose server has GPUs needing action: placement skipped them."""

    node: str
    node_id: int
    cluster: str
    server: int | None
    server_hostname: str | None
    gpus: int
    reasons: list[str]
    """`2 Fatal Xid on a GPU`: GPUs per finding type (a GPU with two findings counts twice)."""


@dataclass
class Alternative:
    """A nearby request that fits now, with the query parameters that ask it."""

    description: str
    cluster: str
    kind: str
    total_gpus: int
    node_count: int
    gpus_per_node: int
    nodes: list[str]
    params: dict[str, Any]


@dataclass
class MigElsewhere:
    """Free MIG devices of the profile asked in a cluster the request did not consider."""

    cluster: str
    kind: str
    free: int
    profiles: list[str]
    nodes: list[str]
    """The nodes with free devices, the most first (at most `MIG_ELSEWHERE_NODES`)."""
    more_nodes: int = 0
    """Nodes with free devices beyond those named."""

    @property
    def text(self) -> str:
        """`14 free on Kubernetes cluster prod: gpu-a07, gpu-a08`."""
        kind = ClusterKind(self.kind).label
        names = ", ".join(self.nodes) + (f" and {self.more_nodes} more" if self.more_nodes else "")
        shown = f" ({', '.join(self.profiles)})" if len(self.profiles) > 1 else ""
        return f"{self.free} free on {kind} cluster {self.cluster}{shown}: {names}"


@dataclass
class ClusterAnswer:
    cluster: str
    kind: str
    fits: bool
    request: str
    total_gpus: int
    node_count: int
    reason: str | None
    models: list[str] = field(default_factory=list)
    mixes_models: bool = False
    mig_profile: str | None = None
    """The MIG profile planned (a request for `1g` takes one of the cluster's 1g profiles)."""


@dataclass
class PlacementResult:
    fits: bool
    total_gpus: int
    requested_gpus: int
    cluster: str | None
    kind: str | None
    nodes: list[NodeChoice]
    reason: str | None
    candidates: list[NodeChoice]
    alternatives: list[Alternative]
    blocked: list[BlockedNode]
    blocked_counts: dict[str, int]
    clusters: list[ClusterAnswer]
    request: dict[str, Any]
    models: list[str] = field(default_factory=list)
    """The GPU models of the nodes chosen."""
    cost: str | None = None
    """What the answer costs in words: mixing GPU models (the job runs at the slowest GPU's
    pace)."""
    scheduler: str | None = None
    """The scheduler the request was for; None: every cluster was tried."""
    scope: str | None = None
    """Which clusters were considered, in words, when the request named a scheduler."""
    fabric: dict[str, Any] | None = None
    """Multi-node answers: `hops` (switches between the farthest two nodes chosen, None when
    a fabric is unknown), `leaves`, `spine_groups`, `nvlink_domains`, and `why` in words."""
    needing_action: list[NeedingAction] = field(default_factory=list)
    """Nodes in scope whose GPUs needing action were skipped, the most first (at most 50)."""
    gpus_needing_action: int = 0
    health: str | None = None
    """The GPUs skipped for health, in words (None: none)."""
    mig_profile: str | None = None
    """The MIG profile placed: the one asked, or for `1g` the profile chosen (None: whole
    GPUs, or no fit)."""
    mig_elsewhere: list[MigElsewhere] = field(default_factory=list)
    """A MIG request that does not fit: where that capacity is free outside the clusters
    asked (other clusters, the other scheduler), the most first."""
