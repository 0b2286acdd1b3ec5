"""The fleet as placement and failure domains see it: nodes, their servers' GPUs, the links
between them. Plain objects built by `selectors` (or by hand, in tests) and pure functions on them.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field, fields, replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from .gpu_sets import FleetGpu, GpuSet, SetRank, best_gpu_set
from .locality import Place, largest_group

if TYPE_CHECKING:
    from .types import Filters

Twin = tuple[int, str, "int | None", "str | None"]
"""(node id, name, server id, server hostname): a node alike to the one that stands for it."""


@dataclass(slots=True)
class FleetMig:
    uuid: str
    gpu_id: int
    profile: str
    memory_bytes: int | None


@dataclass(slots=True)
class FleetNode:
    """A scheduler node: its state, what its scheduler offers and uses (whole GPUs and MIG
    devices by profile), and its server's GPUs when an agent reports them.

    `healthy_whole` is set instead of `gpus` by `selectors.fleet_counts`: healthy GPUs outside
    MIG mode. `shared_busy`/`shared_used` are what another scheduler's node on the same
    server uses (`share_servers`).
    """

    id: int
    name: str
    cluster: str
    kind: str
    ready: bool
    schedulable: bool
    state: str
    state_flags: list[str]
    reason: str
    partitions: list[str]
    server_id: int | None
    server_hostname: str | None
    gpu_capacity: int
    whole_allocatable: int
    whole_used: int | None
    busy_indexes: set[int] | None
    mig_allocatable: dict[str, int]
    mig_used: dict[str, int]
    products: list[str]
    memory_label_bytes: int | None
    gpus: list[FleetGpu] = field(default_factory=list)
    migs: list[FleetMig] = field(default_factory=list)
    shared_busy: set[int] = field(default_factory=set)
    shared_used: int = 0
    healthy_whole: int | None = None
    needing_action: int | None = None
    """With `healthy_whole` (`fleet_counts`): GPUs of its server needing action (not lost)."""
    critical_findings: int = 0
    """Open critical findings on the node or its server: such a node is ranked last."""
    twins: list[Twin] = field(default_factory=list)
    """Nodes alike to this one in all that placement reads but who they are
    (`selectors.group_nodes`): it stands for them, and the planner's answers list them by name
    beside it."""
    twin_of: int | None = None
    """The node that stood for this one (`members`): its GPU facts are not its own yet."""

    @property
    def weight(self) -> int:
        """The nodes it stands for: itself and its twins."""
        return 1 + len(self.twins)

    @property
    def identities(self) -> list[Twin]:
        """(id, name, server id, server hostname) of itself and of each twin."""
        return [(self.id, self.name, self.server_id, self.server_hostname), *self.twins]

    def members(self, limit: int | None = None) -> list[FleetNode]:
        """Itself and each twin as a node of its own, the first `limit` (the twins share its
        GPU facts, so their GPU ids are its own until `selectors.twins_load` reads theirs)."""
        twins = self.twins if limit is None else self.twins[: max(limit - 1, 0)]
        return [self] + [
            node_copy(
                self,
                id=node_id,
                name=name,
                server_id=server_id,
                server_hostname=hostname,
                twins=[],
                twin_of=self.id,
            )
            for node_id, name, server_id, hostname in twins
        ]

    @property
    def whole_free(self) -> int:
        return max(self.whole_allocatable - (self.whole_used or 0), 0)

    @property
    def gpus_needing_action(self) -> int:
        """GPUs of its server (not lost) that need action: skipped by placement."""
        if self.needing_action is not None:
            return self.needing_action
        return sum(1 for g in self.gpus if g.action and g.problem != "lost")


_NODE_FIELDS = attrgetter(*(f.name for f in fields(FleetNode)))


def node_copy(node: FleetNode, **changes: Any) -> FleetNode:
    """`dataclasses.replace(node, **changes)` without its checks per call: a shallow copy with
    the `changes` set (an unknown name raises AttributeError). Four times faster, and a
    multi-node question on a fabric makes one per node (1.6 us against 7 us each)."""
    new = FleetNode(*_NODE_FIELDS(node))
    for name, value in changes.items():
        setattr(new, name, value)
    return new


MASK_BITS = 62
"""GPU indexes below this are bits of `HeldOnNode.mask` (a signed 64-bit integer in the
database); any above (none on real hardware) are listed in `HeldOnNode.beyond`."""


def mask_indexes(mask: int) -> set[int]:
    """The indexes whose bits are set in `mask` (bit i: GPU index i)."""
    found: set[int] = set()
    index = 0
    while mask:
        if mask & 1:
            found.add(index)
        mask >>= 1
        index += 1
    return found


class HeldOnNode(NamedTuple):
    """What running workloads hold on one node (`selectors.held_gpus`): the GPU indexes held,
    as bits (`mask`, with `beyond` for any index of `MASK_BITS` or more), and GPUs known by
    count alone. A tuple: nodes holding alike are alike (`selectors.group_nodes` keys on it),
    and its set of indexes is made only for the node standing for its twins."""

    mask: int
    uncounted: int
    beyond: frozenset[int] = frozenset()

    @property
    def indexes(self) -> set[int]:
        """The GPU indexes held."""
        found = mask_indexes(self.mask)
        return found | self.beyond if self.beyond else found

    @property
    def held(self) -> int:
        """GPUs held: the indexes held and those held by count alone."""
        return self.mask.bit_count() + len(self.beyond) + self.uncounted


@dataclass
class Fleet:
    """Nodes and the interconnect of their servers, as read for one query.

    `classes` holds each server's GPU pair link classes, `pairs` the class of every pair
    where a server mixes several. `nic_pix` (GPU id -> NIC names at PIX distance) and
    `uuids` (GPU id -> UUID) are known only for the servers of an answer (`with_details`).
    """

    nodes: list[FleetNode]
    classes: dict[int, set[str]]
    pairs: dict[int, dict[tuple[int, int], str]]
    nic_pix: dict[int, list[str]] = field(default_factory=dict)
    uuids: dict[int, str] = field(default_factory=dict)
    places: dict[int, Place] = field(default_factory=dict)
    """Server id -> where it sits on the fabric (`locality`); read for multi-node requests."""
    held: dict[int, HeldOnNode] = field(default_factory=dict)
    """Node id -> what running workloads hold there (`selectors.held_gpus`), every node's."""
    summarized: int = 0
    """Servers in scope with a fresh summary (`selectors.fleet_load`): their rows are not read."""
    _sets: dict[tuple, tuple[tuple[int, ...], str | None, SetRank] | None] = field(
        default_factory=dict
    )
    _largest: dict[int, tuple[dict[int, Place], int]] = field(default_factory=dict)
    """`largest_group` by the `places` dict it was worked out for (its id -> the dict, held
    so the id stays its own, and the figure): shared, like `_sets`, by the fleets made from
    this one (`replace`, `workload_verdicts.best_for`), so a pass works it out once."""

    def best_set(
        self, server_id: int, gpus: list[FleetGpu], m: int, filters: Filters
    ) -> GpuSet | None:
        """`best_gpu_set` for a server's free GPUs, remembered by wiring signature.

        Servers of one model are wired alike, so 25,000 of them make a handful of searches:
        the signature is the GPUs' index, NUMA node and NIC affinity plus every pair's class.
        """
        uniform, link_class = self.uniform_class(server_id)
        described = tuple((g.index, g.numa_node, g.id in self.nic_pix) for g in gpus)
        if uniform:
            wiring: tuple = ("uniform", link_class)
        else:
            wiring = tuple(
                self.pair_class(server_id, a.id, b.id) for a, b in itertools.combinations(gpus, 2)
            )
        memo = (described, wiring, m, filters.nvlink_only, filters.same_numa)
        if memo not in self._sets:
            found = best_gpu_set(
                gpus,
                m,
                lambda a, b: self.pair_class(server_id, a, b),
                nvlink_only=filters.nvlink_only,
                same_numa=filters.same_numa,
                nic_gpus=frozenset(g.id for g in gpus if g.id in self.nic_pix),
                uniform=uniform,
            )
            position = {g.id: i for i, g in enumerate(gpus)}
            self._sets[memo] = (
                None
                if found is None
                else (tuple(position[g.id] for g in found.gpus), found.link_class, found.rank)
            )
        remembered = self._sets[memo]
        if remembered is None:
            return None
        positions, worst, rank = remembered
        return GpuSet(tuple(gpus[i] for i in positions), worst, rank)

    def largest_group(self) -> int:
        """`locality.largest_group` of its places, once per places dict (`_largest`)."""
        places = self.places
        known = self._largest.get(id(places))
        if known is None:
            known = self._largest[id(places)] = (places, largest_group(places.values()))
        return known[1]

    def clusters(self) -> dict[str, str]:
        """Cluster name -> kind, for the clusters with nodes in this fleet."""
        return {n.cluster: n.kind for n in self.nodes}

    def of_kind(self, kind: str | None) -> Fleet:
        """The same fleet with only the nodes of one scheduler kind (all, for None).

        The nodes keep what other schedulers' nodes on their servers use (`share_servers` ran
        on the whole read), so a server in both schedulers still lends its GPUs once.
        """
        if kind is None:
            return self
        return replace(self, nodes=[n for n in self.nodes if n.kind == kind])

    def with_details(self, nic_pix: dict[int, list[str]], uuids: dict[int, str]) -> Fleet:
        """The same fleet knowing NIC affinity and UUIDs (the set memo carries over: its
        signature includes NIC affinity)."""
        return replace(self, nic_pix=nic_pix, uuids=uuids)

    def pair_class(self, server_id: int, a: int, b: int) -> str | None:
        """The link class between two GPUs (by row id), None when not known."""
        pairs = self.pairs.get(server_id)
        if pairs is not None:
            return pairs.get((a, b) if a < b else (b, a))
        classes = self.classes.get(server_id)
        if classes and len(classes) == 1:
            return next(iter(classes))
        return None

    def uniform_class(self, server_id: int | None) -> tuple[bool, str | None]:
        """(True, class) when every GPU pair of the server has one class (or none is known)."""
        if server_id is None:
            return True, None
        classes = self.classes.get(server_id)
        if not classes:
            return True, None
        if len(classes) == 1:
            return True, next(iter(classes))
        return False, None


def fleet_merge(first: Fleet, second: Fleet, cluster: str) -> Fleet:
    """One fleet of two reads (`cluster`, then every other cluster): each node once.

    Each read holds every node on the servers of the nodes it is for (`selectors._scope`), so
    what another scheduler uses was counted in full in both: the cluster's nodes come from
    the first, the others' from the second (twins are of one cluster).
    """
    nodes = [n for n in first.nodes if n.cluster == cluster]
    nodes += [n for n in second.nodes if n.cluster != cluster]
    return Fleet(
        nodes=nodes,
        classes={**second.classes, **first.classes},
        pairs={**second.pairs, **first.pairs},
        held={**second.held, **first.held},
    )


def share_servers(nodes: list[FleetNode]) -> None:
    """A server in two schedulers (Kubernetes and Slurm) lends its GPUs to both: what one
    uses, the other cannot have. Known Slurm indexes are excluded by index, the rest by count.
    """
    on_server: dict[int, list[FleetNode]] = defaultdict(list)
    for node in nodes:
        if node.server_id is not None:
            on_server[node.server_id].append(node)
    for sharing in on_server.values():
        if len(sharing) < 2:
            continue
        for node in sharing:
            for other in sharing:
                if other is node or not other.whole_used:
                    continue
                if other.busy_indexes is not None:
                    node.shared_busy |= other.busy_indexes
                else:
                    node.shared_used += other.whole_used
