"""Every query placement makes: the read boundary, the only module of the package that
touches the ORM. The planner works on what these functions return.

Read in a fixed number of queries (`values()` rows, JSON read as text, each GPU's state in one
SQL column) into the plain objects of `facts`, so a query costs the same round trips at 20
nodes and at 25,000. Failure domains read here too (`fleet_counts`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import (
    Aggregate,
    BigIntegerField,
    Case,
    Count,
    ExpressionWrapper,
    F,
    Func,
    IntegerField,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
    TextField,
    Value,
    When,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce

from agent.mig import normalize_mig_profile
from clusters.choices import ClusterKind
from clusters.models import Cluster, Node
from findings.choices import Severity
from findings.models import Finding
from health.selectors import action_rows, annotate_action, gpus_needing_action_qs
from inventory.choices import GpuStatus
from inventory.health import UNHEALTHY, gpu_problem_code, problem_of_code
from inventory.models import Gpu, Link, MigDevice, Server

from .facts import (
    MASK_BITS,
    Fleet,
    FleetGpu,
    FleetMig,
    FleetNode,
    HeldOnNode,
    node_copy,
    share_servers,
)
from .leaves import LeafSummary, leaf_summaries, places_from
from .locality import Place


def _parse_indexes(text: str | None) -> set[int] | None:
    """Slurm's `IDX:0-3,5` GPU indexes; None when not given."""
    if not text or text.upper() in ("N/A", "(NULL)"):
        return set() if text else None
    indexes: set[int] = set()
    for part in text.split(","):
        bounds = part.strip().split("-")
        try:
            low, high = int(bounds[0]), int(bounds[-1])
        except ValueError:
            return None
        indexes.update(range(low, high + 1))
    return indexes


def _gpu_state() -> ExpressionWrapper:
    """One integer per GPU: its `gpu_problem_code` x 2, plus 1 in MIG mode. One computed
    column is one conversion per row instead of five."""
    mig = Case(When(mig_mode_current=True, then=Value(1)), default=Value(0))
    return ExpressionWrapper(gpu_problem_code() * Value(2) + mig, output_field=IntegerField())


def _json(text: str | None, default: Any) -> Any:
    """A JSON column read as text: most are empty, and skipping their decode is most of the
    cost of reading 25,000 nodes."""
    if not text or text in ("[]", "{}", "null", '""'):
        return default
    return json.loads(text)


def _scope(cluster: str | None, other_than: str | None = None) -> QuerySet[Node]:
    """The cluster's nodes (or every cluster's but `other_than`'s), with the nodes of other
    clusters on the same servers: what those use, this cluster cannot have."""
    nodes = Node.objects.filter(gone_at__isnull=True)
    if cluster:
        wanted = Q(cluster__name=cluster)
    elif other_than:
        wanted = ~Q(cluster__name=other_than)
    else:
        return nodes
    shared = nodes.filter(wanted, server__isnull=False).values("server_id")
    return nodes.filter(wanted | Q(server_id__in=shared))


def _node_facts(row: dict[str, Any]) -> FleetNode:
    """Whole-GPU and MIG figures of one node row, the same way for both schedulers."""
    kind = row["cluster__kind"]
    gres = _json(row["gres_text"], [])
    mig_allocatable: dict[str, int] = {}
    mig_used: dict[str, int] = {}
    products = [row["gpu_product"], row["product_label"] or ""]
    if kind == ClusterKind.SLURM and gres:
        whole = [g for g in gres if g.get("name") == "gpu" and not g.get("mig_profile")]
        allocatable = sum(int(g.get("count") or 0) for g in whole)
        used_values = [g.get("used") for g in whole]
        used = None if any(u is None for u in used_values) else sum(used_values)
        busy: set[int] | None = set() if used == 0 else None
        if used:
            parsed = [_parse_indexes(g.get("used_indexes")) for g in whole if g.get("used")]
            if parsed and all(p is not None for p in parsed):
                busy = set().union(*parsed)  # type: ignore[arg-type]
        for g in gres:
            profile = normalize_mig_profile(g.get("mig_profile"))
            if g.get("name") != "gpu":
                continue
            if profile:
                mig_allocatable[profile] = mig_allocatable.get(profile, 0) + int(g["count"] or 0)
                mig_used[profile] = mig_used.get(profile, 0) + int(g.get("used") or 0)
            elif g.get("type"):
                products.append(g["type"])
    else:
        allocatable = row["gpu_allocatable"] or 0
        used = row["gpu_used"]
        busy = set() if used == 0 else None
        for key, count in _json(row["mig_resources_text"], {}).items():
            profile = normalize_mig_profile(key) or key
            mig_allocatable[profile] = mig_allocatable.get(profile, 0) + int(count or 0)
        for key, count in _json(row["mig_used_text"], {}).items():
            profile = normalize_mig_profile(key) or key
            mig_used[profile] = mig_used.get(profile, 0) + int(count or 0)
        single = (
            normalize_mig_profile(row["gpu_product"]) if row["mig_strategy"] == "single" else None
        )
        if single and "-mig-" in row["gpu_product"].lower():
            # MIG strategy single: nvidia.com/gpu counts MIG devices of one profile, not GPUs
            mig_allocatable[single] = allocatable
            mig_used[single] = used or 0
            allocatable, used, busy = 0, 0, set()
    memory_label = row["memory_label"] or ""
    return FleetNode(
        id=row["id"],
        name=row["name"],
        cluster=row["cluster__name"],
        kind=kind,
        ready=bool(row["ready"]),
        schedulable=bool(row["schedulable"]),
        state=row["state"],
        state_flags=list(_json(row["state_flags_text"], [])),
        reason=row["reason"] or "",
        partitions=list(_json(row["partitions_text"], [])),
        server_id=row["server_id"],
        server_hostname=row["server__hostname"],
        gpu_capacity=row["gpu_capacity"] or 0,
        whole_allocatable=allocatable,
        whole_used=used,
        busy_indexes=busy,
        mig_allocatable=mig_allocatable,
        mig_used=mig_used,
        products=[p for p in products if p],
        memory_label_bytes=int(memory_label) * 2**20 if str(memory_label).isdigit() else None,
    )


NODE_FIELDS = (
    "id",
    "name",
    "server_id",
    "server__hostname",
    "cluster_id",
    "ready",
    "schedulable",
    "state",
    "reason",
    "gpu_capacity",
    "gpu_allocatable",
    "gpu_used",
    "gpu_product",
    "mig_strategy",
)
NODE_JSON_FIELDS = ("state_flags", "partitions", "gres", "mig_resources", "mig_used")
IDENTITY = 4
"""The first four columns of a node row say which node it is; the rest, what it offers."""
TWINS = True
"""Nodes alike stand as one (`group_nodes`); off, each node is its own, the reference the
tests hold the grouped answers to."""


def _labels(unless: Q) -> dict[str, Any]:
    """The GPU product and memory labels (GPU feature discovery) of a node row, None where
    `unless` holds. On SQLite, JSON_EXTRACT alone: `KT` checks each value's JSON type first,
    two more parses of the labels per row, for values that are always strings here."""
    keys = {"product_label": "nvidia.com/gpu.product", "memory_label": "nvidia.com/gpu.memory"}
    found: dict[str, Any] = {
        name: Func(
            F("labels"), Value(f'$."{key}"'), function="JSON_EXTRACT", output_field=TextField()
        )
        if connection.vendor == "sqlite"
        else KT(f"labels__{key}")
        for name, key in keys.items()
    }
    return {
        name: Case(When(unless, then=Value(None)), default=label, output_field=TextField())
        for name, label in found.items()
    }


class _Joined(Func):
    """`a || b || ...`: one flat concatenation of text (Django's `Concat` nests a pair per
    argument and coalesces each)."""

    arg_joiner = " || "
    template = "(%(expressions)s)"
    output_field = TextField()


JSON_SEPARATOR = "\x1f"
"""Between the JSON columns of a node row read as one text: JSON never holds it raw."""


def _node_rows(scope: QuerySet[Node]) -> tuple[tuple[str, ...], Iterable[tuple]]:
    """The column names and the rows of the nodes in scope, in no order, as the database
    returns them (SQLite's booleans are 0 and 1): the node's identity (`IDENTITY`), what it
    offers (its JSON columns as one text, `JSON_SEPARATOR` between them: each value read is a
    Python object made, and those made most of the cost), then its server's published
    summary shape (`Server.placement_shape`: "" unless its summary is fresh)."""
    texts: list[Any] = []
    for name in NODE_JSON_FIELDS:
        texts += [Cast(name, TextField()), Value(JSON_SEPARATOR)]
    # the labels stand in for an agent's GPUs (`_node_facts`): not read where a server's
    # summary knows some (a Kubernetes node's labels are kilobytes of JSON to parse)
    labels = _labels(unless=Q(server__placement_shape__startswith="g"))
    names = (*NODE_FIELDS, "json_text", *labels, "server__placement_shape")
    query = (
        scope.order_by()  # `group_nodes` orders each group by name: less than sorting all
        .annotate(json_text=_Joined(*texts[:-1]), **labels)
        .values_list(*names)
    )
    return names, _rows(query)


def _offer(row: dict[str, Any], clusters: dict[int, tuple[str, str]]) -> FleetNode:
    """What the node of a `_node_rows` row offers (`_node_facts`)."""
    name, kind = clusters[row["cluster_id"]]
    texts = row["json_text"].split(JSON_SEPARATOR)
    return _node_facts(
        {
            **row,
            "cluster__name": name,
            "cluster__kind": kind,
            **{f"{field}_text": text for field, text in zip(NODE_JSON_FIELDS, texts, strict=True)},
        }
    )


class Criticals(NamedTuple):
    """Open critical findings (ids) by node id and by server id."""

    by_node: dict[int, set[int]]
    by_server: dict[int, set[int]]

    def of(self, node_id: int, server_id: int | None) -> int:
        """The node's open critical findings: its own and its server's, each once."""
        mine = self.by_node.get(node_id)
        theirs = self.by_server.get(server_id) if server_id is not None else None
        if mine and theirs:
            return len(mine | theirs)
        return len(mine or theirs or ())


def critical_counts() -> Criticals:
    """One query over the open critical findings, which are few whatever the fleet (a
    subquery per node row cost more than the rest of the read)."""
    found = Criticals(defaultdict(set), defaultdict(set))
    for finding_id, node_id, server_id in Finding.objects.filter(
        resolved_at__isnull=True, severity=Severity.CRITICAL
    ).values_list("id", "node_id", "server_id"):
        if node_id is not None:
            found.by_node[node_id].add(finding_id)
        if server_id is not None:
            found.by_server[server_id].add(finding_id)
    return found


_STALE = object()
"""Marks a server without a fresh summary in the keys of `group_nodes`."""


@dataclass
class NodeGroups:
    """Nodes alike as one (`group_nodes`), and the summary shapes of their servers."""

    nodes: list[FleetNode]
    shapes: dict[int, str]
    """Node id (of each node standing for its twins) -> its server's summary shape, for a
    server with a fresh summary."""
    summarized: int
    """Servers with a fresh summary."""


_IDENTITY = itemgetter(*range(IDENTITY))
"""The identity of a `_node_rows` row (`FleetNode.twins`), at C speed."""


def group_nodes(
    scope: QuerySet[Node],
    *,
    marks: dict[int, Any] | None = None,
    criticals: Criticals | None = None,
    held: dict[int, HeldOnNode] | None = None,
    twins: bool = True,
) -> NodeGroups:
    """The nodes in scope, one `FleetNode` per set of twins: nodes alike in everything
    placement and failure domains read but who they are (`FleetNode.twins`).

    Alike: the same scheduler facts; the same summary shape of their servers (a server
    without a fresh summary is alike to no other) and the same `marks` on them (the GPUs
    needing action); the same number of critical findings; the same GPUs used by another
    scheduler on their server; the same GPUs held by running workloads (`held`: their indices
    are then the node's busy GPUs, `held_gpus`). The planner then works once per kind of node:
    25,000 nodes of a few kinds cost little more than reading them. The first of each set by
    name stands for it. Two queries: the nodes, their clusters.

    Not their place on the fabric: a multi-node plan takes every member as a node of its own
    (`Planner.members`), each at its own server's place, so a place in the key only split the
    sets (into a few nodes each, at 32 servers a leaf) and made the planner work per node.
    """
    names, rows = _node_rows(scope)
    first = len(names) - 1  # the shape column
    clusters = {pk: (n, k) for pk, n, k in Cluster.objects.values_list("pk", "name", "kind")}
    kinds: dict[tuple, int] = {}
    bases: list[FleetNode] = []  # per kind of offer, what it offers
    groups: dict[tuple, list[tuple]] = {}
    seen: set[int] = set()
    shared: set[int] = set()
    fresh = 0
    marks = marks or {}
    by_node = criticals.by_node if criticals else {}
    by_server = criticals.by_server if criticals else {}
    held = held or {}
    more = bool(marks or by_node or by_server or held)  # else none has more to tell
    for row in rows:
        offer = row[IDENTITY:first] if TWINS and twins else row[:1]
        kind = kinds.get(offer)
        if kind is None:
            kind = kinds[offer] = len(bases)
            bases.append(_offer(dict(zip(names, row, strict=True)), clusters))
        server_id = row[2]
        shape = row[first]
        if server_id is not None:
            if server_id in seen:
                shared.add(server_id)
            else:
                seen.add(server_id)
                fresh += bool(shape)
        key = (
            kind,
            shape or (_STALE, server_id),
            (
                marks.get(server_id),
                criticals.of(row[0], server_id)  # type: ignore[union-attr]
                if row[0] in by_node or server_id in by_server
                else 0,
                held.get(row[0]),
            )
            if more
            else None,
        )
        found = groups.get(key)
        if found is None:
            groups[key] = [row]
        else:
            found.append(row)
    if shared:
        groups = _regroup_shared(groups, shared, bases)
    nodes = []
    shapes: dict[int, str] = {}
    for key, alike in groups.items():
        kind, shape, told = key[:3]
        shares: tuple[frozenset[int], int] = key[3] if len(key) > 3 else (frozenset(), 0)
        busy, used = shares
        if len(alike) > 1:
            alike.sort(key=itemgetter(1))  # by name: the first stands for the others
        row, rest = alike[0], alike[1:]
        nodes.append(
            node_copy(
                bases[kind],
                id=row[0],
                name=row[1],
                server_id=row[2],
                server_hostname=row[3],
                critical_findings=told[1] if told else 0,
                shared_busy=set(busy),
                shared_used=used,
                twins=list(map(_IDENTITY, rest)),
            )
        )
        if told and told[2] is not None:
            _hold(nodes[-1], told[2])
        if isinstance(shape, str):
            shapes[row[0]] = shape
    nodes.sort(key=lambda n: (n.cluster, n.name))
    return NodeGroups(nodes, shapes, fresh)


def _hold(node: FleetNode, on: HeldOnNode) -> None:
    """The node's busy GPUs are those running workloads hold (`held_gpus`): exactly their
    indices, never fewer in use than its scheduler says (a listing not yet applied)."""
    node.busy_indexes = None if on.uncounted else on.indexes
    node.whole_used = max(on.held, node.whole_used or 0)


def _regroup_shared(
    groups: dict[tuple, list[tuple]], shared: set[int], bases: list[FleetNode]
) -> dict[tuple, list[tuple]]:
    """The groups again, the nodes of servers in two schedulers keyed also by what the other
    scheduler's node uses there (`share_servers`)."""
    moved: list[tuple[tuple, tuple]] = []
    kept: dict[tuple, list[tuple]] = {}
    for key, rows in groups.items():
        stay = [r for r in rows if r[2] not in shared]
        moved += [(key, r) for r in rows if r[2] in shared]
        if stay:
            kept[key] = stay
    nodes = [
        replace(bases[key[0]], id=row[0], server_id=row[2], shared_busy=set(), shared_used=0)
        for key, row in moved
    ]
    share_servers(nodes)
    for (key, row), node in zip(moved, nodes, strict=True):
        sharing = (frozenset(node.shared_busy), node.shared_used)
        kept.setdefault((*key, sharing), []).append(row)
    return kept


def free_elsewhere(other_than: str) -> dict[tuple[str, str], dict[int, int]]:
    """(cluster name, kind) -> {whole GPUs free by its scheduler's columns: nodes} of every
    cluster but `other_than`, counting its ready and schedulable nodes (any other frees 0):
    what `alternatives.may_fit_elsewhere` bounds those clusters' answers with. Two queries
    (the clusters, then a row per cluster and figure, whatever the fleet); one where a
    cluster is not Kubernetes: its nodes are not counted (empty), as every other cluster is
    read then."""
    clusters = {
        pk: (name, kind)
        for pk, name, kind in Cluster.objects.exclude(name=other_than).values_list(
            "pk", "name", "kind"
        )
    }
    found: dict[tuple[str, str], dict[int, int]] = {c: {} for c in clusters.values()}
    if any(kind != ClusterKind.KUBERNETES for _, kind in clusters.values()):
        return found
    eligible = Q(ready=True, schedulable=True)
    free = ExpressionWrapper(
        F("gpu_allocatable") - Coalesce("gpu_used", Value(0)), output_field=IntegerField()
    )
    for cluster_id, figure, nodes in (
        Node.objects.filter(gone_at__isnull=True, cluster_id__in=list(clusters))
        .annotate(free=Case(When(eligible, then=free), default=Value(0)))
        .order_by()
        .values("cluster_id", "free")
        .annotate(nodes=Count("id"))
        .values_list("cluster_id", "free", "nodes")
    ):
        found[clusters[cluster_id]][figure] = nodes
    return found


def fresh_summaries(servers: Any) -> QuerySet:
    """The summaries (`placement.ServerPlacement`) of `servers` (a `server_id` values query)
    built from their server's current report: a stale or missing one reads the rows instead."""
    from .models import ServerPlacement

    return (
        ServerPlacement.objects.filter(server_id__in=servers, stamp=F("server__last_report_hash"))
        .exclude(stamp="")
        .exclude(shape="")
    )


IN_LIST_LIMIT = 2000


def _without_summary(servers: QuerySet) -> QuerySet:
    """The servers (a `server_id` values query) without a fresh summary, as a subquery."""
    return servers.exclude(server_id__in=fresh_summaries(servers).values("server_id"))


def _stale(servers: QuerySet, grouped: NodeGroups) -> Any:
    """The servers in scope without a fresh summary: None when there is none (their row reads
    are skipped), their ids when few, else a subquery (an id list that long costs more).
    Callers test it with `is not None`: truth-testing the subquery would run it. A server
    without a summary is alike to no other, so its node stands for itself."""
    stale = {
        n.server_id for n in grouped.nodes if n.server_id is not None and n.id not in grouped.shapes
    }
    if not stale:
        return None
    if len(stale) <= IN_LIST_LIMIT:
        return sorted(stale)
    return _without_summary(servers)


def gpu_rows(servers: QuerySet) -> Iterable[tuple]:
    """(id, server_id, index, name, memory_total_bytes, numa_node, state) of the servers' GPUs;
    `state` is `_gpu_state` (problem code x 2, plus 1 in MIG mode). One query."""
    return _rows(
        Gpu.objects.filter(server_id__in=servers)
        .order_by()
        .annotate(gpu_state=_gpu_state())
        .values_list(
            "id", "server_id", "index", "name", "memory_total_bytes", "numa_node", "gpu_state"
        )
    )


def mig_rows(servers: QuerySet) -> Iterable[tuple]:
    """(uuid, gpu_id, server_id, profile, memory_bytes) of the servers' MIG devices (one
    query)."""
    return (
        MigDevice.objects.filter(gpu__server_id__in=servers)
        .order_by()
        .values_list("uuid", "gpu_id", "gpu__server_id", "profile", "memory_bytes")
    )


def link_rows(
    servers: QuerySet,
) -> tuple[dict[int, set[str]], dict[int, dict[tuple[int, int], str]]]:
    """Per server its GPU pair link classes, and the class of every pair where it mixes
    several (two queries, the second only when one does)."""
    per_server = (
        Link.objects.filter(gpu_b__isnull=False, server_id__in=servers)
        .order_by()
        .values("server_id")
        .annotate(low=Min("link_class"), high=Max("link_class"))
    )
    classes: dict[int, set[str]] = {
        server_id: {low, high}
        for server_id, low, high in per_server.values_list("server_id", "low", "high")
    }
    pairs: dict[int, dict[tuple[int, int], str]] = defaultdict(dict)
    if any(len(c) > 1 for c in classes.values()):
        mixed = per_server.filter(low__lt=F("high")).values("server_id")
        for server_id, a, b, link_class in (
            Link.objects.filter(gpu_b__isnull=False, server_id__in=mixed)
            .order_by()
            .values_list("server_id", "gpu_a_id", "gpu_b_id", "link_class")
        ):
            pairs[server_id][(a, b) if a < b else (b, a)] = link_class
    return classes, dict(pairs)


_ACTIONS_SQL: dict[str, tuple[str, tuple[Any, ...]]] = {}
"""The SQL of `gpu_actions`' query by database vendor, compiled once: the rule's query is the
same text whatever the fleet (no value in it is read from the data, the clock or the
settings), and building and compiling it (a union, eleven subqueries) cost more than running
it at 6,000 servers on SQLite."""


def _needing_action() -> list[Gpu]:
    """The fleet's GPUs the rule's cheap superset holds, each with its server (its hostname
    only), `action_reason`, `action_finding` and `gpu_state`, by id: the rows of
    `health.selectors.gpus_needing_action_qs`, from its compiled SQL (`_ACTIONS_SQL`)."""
    compiled = _ACTIONS_SQL.get(connection.vendor)
    if compiled is None:
        query = (
            gpus_needing_action_qs(Gpu.objects.all())
            .annotate(gpu_state=_gpu_state(), server_hostname=F("server__hostname"))
            .order_by("id")
        )
        compiled = _ACTIONS_SQL[connection.vendor] = query.query.sql_with_params()
    gpus = list(Gpu.objects.raw(*compiled))
    for gpu in gpus:
        gpu.server = Server(id=gpu.server_id, hostname=gpu.server_hostname)  # type: ignore[attr-defined]
    return gpus


def gpu_actions() -> dict[int, tuple[int, str, int, int]]:
    """GPU id -> (server id, its reason to act in words, its `_gpu_state`, its index) for the
    fleet's GPUs needing action (`health.action`): one query over the GPUs the rule's cheap
    superset holds (few, whatever the fleet; its SQL compiled once, `_needing_action`), one
    more for the findings they name, if any.

    The whole fleet's, not a scope's: callers look them up by the server or GPU ids they read,
    so one outside their scope is never seen, and without the scope the database finds the
    few through its indexes (gpu_failing_status, the findings') instead of walking every
    GPU of the scope (35 ms -> 1 ms at 5,000 servers on SQLite)."""
    gpus = _needing_action()
    return {
        gpu.pk: (gpu.server_id, row.words, gpu.gpu_state, gpu.index)  # type: ignore[attr-defined]
        for gpu, row in zip(gpus, action_rows(gpus), strict=True)
        if row is not None
    }


def fleet_counts(*, cluster: str | None = None, with_held: bool = False) -> Fleet:
    """Nodes with their servers' usable whole-GPU counts, not the GPUs: six queries at most
    (GPUs needing action, critical findings, nodes with their summaries' shapes, clusters, the
    counts of the summaries of the servers standing for their twins, GPU counts of servers
    without a fresh summary), nodes alike as one with their twins (`group_nodes`).

    Usable: healthy (`inventory.health`), outside MIG mode and not needing action
    (`health.selectors`); GPUs needing action are counted beside. Enough for what is free per node
    (`node_free_gpus`), at a tenth of the rows of `fleet_load`; placement needs the GPUs
    themselves, failure domains do not. `with_held`: one more query, the GPUs running
    workloads hold (`held_gpus`), counted as used (the fleet's fragmentation reads so).
    """
    scope = _scope(cluster)
    servers = scope.filter(server__isnull=False).values("server_id")
    acting: dict[int, tuple[int, int]] = defaultdict(lambda: (0, 0))
    for server_id, _type, state, _index in gpu_actions().values():
        if state >> 1 != 1:  # not lost: (usable GPUs among them, GPUs)
            usable, needing = acting[server_id]
            acting[server_id] = (usable + (state == 0), needing + 1)
    held = held_gpus(scope if cluster else None) if with_held else {}
    grouped = group_nodes(scope, marks=dict(acting), criticals=critical_counts(), held=held)
    fresh = {n.server_id for n in grouped.nodes if n.id in grouped.shapes}
    counts: dict[int, tuple[int, int]] = {}
    read: set[int | None] = set()
    for server_id, usable, known in fresh_summaries(
        fresh if len(fresh) <= IN_LIST_LIMIT else servers
    ).values_list("server_id", "usable", "known"):
        read.add(server_id)
        if known:  # GPUs known
            taken, needing = acting.get(server_id, (0, 0))
            counts[server_id] = (usable - taken, needing)
    for node in grouped.nodes:  # a summary rebuilt since the nodes were read: its rows
        if node.id in grouped.shapes and node.server_id not in read:
            del grouped.shapes[node.id]
    action = Q(action_reason__gt=0)
    usable_q = ~UNHEALTHY & ~Q(mig_mode_current=True) & ~action
    stale = _stale(servers, grouped)
    if stale is not None:
        counts.update(
            {
                server_id: (n, needing)
                for server_id, n, needing, known in annotate_action(
                    Gpu.objects.filter(server_id__in=stale)
                )
                .exclude(status=GpuStatus.LOST)
                .order_by()
                .values("server_id")
                .annotate(
                    n=Count("id", filter=usable_q),
                    needing=Count("id", filter=action),
                    known=Count("id"),
                )
                .values_list("server_id", "n", "needing", "known")
                if known
            }
        )
    for node in grouped.nodes:
        found_counts = counts.get(node.server_id) if node.server_id is not None else None
        if found_counts is not None:
            node.healthy_whole, node.needing_action = found_counts
    return Fleet(
        nodes=grouped.nodes, classes={}, pairs={}, summarized=grouped.summarized, held=held
    )


def fleet_load(
    *,
    cluster: str | None = None,
    other_than: str | None = None,
    with_mig: bool = False,
    with_links: bool = True,
    with_held: bool = True,
    twins: bool = True,
    held: dict[int, HeldOnNode] | None = None,
    actions: dict[int, tuple[int, str, int, int]] | None = None,
    criticals: Criticals | None = None,
) -> Fleet:
    """Nodes in scope with their servers' GPUs and GPU-pair link classes, nodes alike as one
    with their twins (`group_nodes`): at most ten queries (GPUs needing action, critical
    findings, with `with_held` the GPUs running workloads hold (`held_gpus`); `held`,
    `actions` (`gpu_actions`) and `criticals` (`critical_counts`) given are not read again:
    the fleet's own, read once for the several reads of one answer), nodes with their
    summaries' shapes, clusters, the summaries of the servers
    standing for their twins; only when some server has no fresh summary, those servers'
    GPUs, MIG devices with `with_mig`, link classes and mixed pairs with `with_links`).

    Servers are alike by their summary's shape (`summaries.shape_of`) and the GPUs needing
    action on them (not by their place on the fabric: `group_nodes`). A server without a
    fresh summary is read from its rows, the same way the summaries are built, so the
    answers do not depend on which. `twins=False`: every node its own (the workloads'
    verdicts change each node's busy GPUs to what they were at a start).
    """
    scope = _scope(cluster, other_than)
    servers = scope.filter(server__isnull=False).values("server_id")
    if actions is None:
        actions = gpu_actions()
    acted: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for server_id, finding_type, _state, index in actions.values():
        acted[server_id].append((index, finding_type))
    if criticals is None:
        criticals = critical_counts()
    if held is None:
        held = held_gpus(scope if cluster or other_than else None) if with_held else {}
    grouped = group_nodes(
        scope,
        marks={server_id: tuple(sorted(found)) for server_id, found in acted.items()},
        criticals=criticals,
        held=held,
        twins=twins,
    )
    nodes = grouped.nodes
    facts = server_facts(
        {n.server_id for n in nodes if n.server_id is not None},
        servers,
        fresh={n.server_id for n in nodes if n.id in grouped.shapes and n.server_id is not None},
        with_mig=with_mig,
        with_links=with_links,
    )
    for gpus in facts.gpus.values():
        for gpu in gpus:
            if gpu.id in actions:
                gpu.action = actions[gpu.id][1]
    for node in nodes:
        if node.server_id is not None:
            node.gpus = facts.gpus.get(node.server_id, [])
            node.migs = facts.migs.get(node.server_id, [])
    return Fleet(
        nodes=nodes,
        classes=facts.classes,
        pairs=facts.pairs,
        summarized=grouped.summarized,
        held=held,
    )


def twins_load(twins: list[FleetNode], fleet: Fleet, *, with_mig: bool) -> dict[int, FleetNode]:
    """Node id -> the twin as a node of its own: its server's GPUs and MIG devices read (one to
    four queries), each GPU needing the action its stand-in's GPU of that index needs. The
    fleet learns their servers' links."""
    ids = {n.server_id for n in twins if n.server_id is not None}
    facts = server_facts(ids, with_mig=with_mig)
    fleet.classes.update(facts.classes)
    fleet.pairs.update(facts.pairs)
    stand_ins = {n.id: n for n in fleet.nodes}
    own: dict[int, FleetNode] = {}
    for twin in twins:
        stand_in = stand_ins.get(twin.twin_of or 0)
        actions = {g.index: g.action for g in stand_in.gpus} if stand_in else {}
        gpus = [
            replace(g, action=actions.get(g.index)) for g in facts.gpus.get(twin.server_id or 0, [])
        ]
        migs = facts.migs.get(twin.server_id or 0, [])
        own[twin.id] = replace(twin, gpus=gpus, migs=migs, twin_of=None)
    return own


@dataclass
class ServerFacts:
    """What placement reads of some servers: GPUs (by index), MIG devices, link classes."""

    gpus: dict[int, list[FleetGpu]]
    migs: dict[int, list[FleetMig]]
    classes: dict[int, set[str]]
    pairs: dict[int, dict[tuple[int, int], str]]


def server_facts(
    wanted: set[int],
    scope: QuerySet | None = None,
    *,
    fresh: set[int] | None = None,
    with_mig: bool = False,
    with_links: bool = True,
) -> ServerFacts:
    """The GPUs (by index), MIG devices and links of the `wanted` servers: from their fresh
    summaries (of those in `fresh` when given: the others have none), else from their rows.
    Past `IN_LIST_LIMIT` servers, `scope` (the `server_id` values query they come from) is
    read instead of an id list that long."""
    many = scope is not None and len(wanted) > IN_LIST_LIMIT
    servers: Any = scope if many else (wanted if fresh is None else fresh)
    fields = ["server_id", "gpus", "links"] + (["migs"] if with_mig else [])
    found = ServerFacts({}, defaultdict(list), {}, {})
    read: set[int] = set()
    summaries = fresh_summaries(servers).order_by().values_list(*fields)
    for row in summaries if many or servers else ():
        server_id, gpus_text, links_text = row[0], row[1], row[2]
        if server_id not in wanted:  # read with the whole scope
            continue
        read.add(server_id)
        found.gpus[server_id] = [
            FleetGpu(g, i, n, mem, numa, bool(st & 1), problem_of_code(st >> 1))
            for g, i, n, mem, numa, st in json.loads(gpus_text)
        ]
        if links_text.startswith("{"):
            links = json.loads(links_text)
            found.classes[server_id] = set(links["classes"])
            found.pairs[server_id] = {(a, b): c for a, b, c in links["pairs"]}
        elif links_text:
            found.classes[server_id] = {links_text}
        if with_mig:
            found.migs[server_id] = [
                FleetMig(uuid, gpu_id, normalize_mig_profile(profile) or profile, memory)
                for uuid, gpu_id, profile, memory in json.loads(row[3])
            ]
    missing = wanted - read
    if not missing:
        return found
    stale: Any = sorted(missing)
    if many and len(missing) > IN_LIST_LIMIT:
        stale = _without_summary(servers)
    for gpu_id, server_id, index, name, memory, numa, state in gpu_rows(stale):
        found.gpus.setdefault(server_id, []).append(
            FleetGpu(
                gpu_id, index, name, memory, numa, bool(state & 1), problem_of_code(state >> 1)
            )
        )
    for server_id, gpus in found.gpus.items():
        if server_id not in read:
            gpus.sort(key=lambda g: g.index)
    if with_mig:
        for uuid, gpu_id, server_id, profile, memory in mig_rows(stale):
            found.migs[server_id].append(
                FleetMig(uuid, gpu_id, normalize_mig_profile(profile) or profile, memory)
            )
    if with_links:
        stale_classes, stale_pairs = link_rows(stale)
        found.classes.update(stale_classes)
        found.pairs.update(stale_pairs)
    return found


def _rows(queryset: QuerySet) -> Iterable[tuple]:
    """The queryset's rows as the database returns them, in chunks.

    For the one hot read (200,000 GPU rows at 25,000 servers) whose columns need no
    conversion: the ORM builds the SQL, the per-row converters are skipped (0.34 s -> 0.20 s
    at 25,000 servers on SQLite).
    """
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while chunk := cursor.fetchmany(5000):
            yield from chunk


def answer_details(server_ids: Iterable[int]) -> tuple[dict[int, list[str]], dict[int, str]]:
    """For the servers of an answer: NICs at PIX distance per GPU id, and GPU UUIDs by id.

    Two queries, or none without servers. See `Fleet.with_details`.
    """
    servers = set(server_ids)
    if not servers:
        return {}, {}
    nic_pix: dict[int, list[str]] = defaultdict(list)
    for gpu_id, nic in (
        Link.objects.filter(server_id__in=servers, nic__isnull=False, link_class="PIX")
        .order_by("nic__name")
        .values_list("gpu_a_id", "nic__name")
    ):
        nic_pix[gpu_id].append(nic)
    uuids = dict(Gpu.objects.filter(server_id__in=servers).values_list("id", "uuid"))
    return dict(nic_pix), uuids


def placement_choices() -> dict[str, list[str]]:
    """What the placement form offers: cluster names, GPU models, MIG profiles (3 queries)."""
    return {
        "clusters": list(Cluster.objects.order_by("name").values_list("name", flat=True)),
        "models": list(
            Gpu.objects.exclude(status=GpuStatus.LOST)
            .exclude(name="")
            .order_by("name")
            .values_list("name", flat=True)
            .distinct()
        ),
        "mig_profiles": list(
            MigDevice.objects.exclude(profile="")
            .order_by("profile")
            .values_list("profile", flat=True)
            .distinct()
        ),
    }


def cable_places() -> dict[int, Place]:
    """Where every server cabled to a fabric sits: its leaf (or leaf group) and spine group,
    from every server cable (two queries; what the leaf summaries are built from,
    `placement.leaf_summaries`).

    A leaf group (the rail leaves of one scalable unit) counts as one leaf: NIC k of each of
    its servers meets NIC k of the others on leaf k. A spine group is what the leaves reach
    through switches of tier 2 and below. A server cabled to several leaf groups (a miswired
    one) takes the lowest.
    """
    from fabric.choices import LinkState
    from fabric.models import FabricLink

    live = FabricLink.objects.filter(gone_at__isnull=True, state=LinkState.UP)
    leaves: dict[int, tuple[str, str, int]] = {}
    for server_id, switch_id, name, override, inferred, group, fabric_id in (
        live.filter(a_switch__isnull=False, b_adapter__server__isnull=False)
        .order_by()
        .values_list(
            "b_adapter__server_id",
            "a_switch_id",
            "a_switch__name",
            "a_switch__tier_override",
            "a_switch__tier_inferred",
            "a_switch__leaf_group",
            "a_switch__fabric_id",
        )
        .distinct()
    ):
        if (override or inferred) not in (None, 1):
            continue
        key = f"{fabric_id}:g{group}" if group else f"{fabric_id}:s{switch_id}"
        label = f"leaf group {group}" if group else (name or f"switch {switch_id}")
        if server_id not in leaves or key < leaves[server_id][0]:
            leaves[server_id] = (key, label, switch_id)
    parent: dict[int, int] = {}
    names: dict[int, str] = {}

    def root(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b, a_tier, b_tier, a_name, b_name in live.filter(
        a_switch__isnull=False, b_switch__isnull=False
    ).values_list(
        "a_switch_id",
        "b_switch_id",
        Coalesce("a_switch__tier_override", "a_switch__tier_inferred"),
        Coalesce("b_switch__tier_override", "b_switch__tier_inferred"),
        "a_switch__name",
        "b_switch__name",
    ):
        if not a_tier or not b_tier or a_tier > 2 or b_tier > 2:
            continue
        for switch, tier, name in ((a, a_tier, a_name), (b, b_tier, b_name)):
            if tier == 2:
                names[switch] = name or f"switch {switch}"
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    spine_names: dict[int, str] = {}
    for switch, name in names.items():
        r = root(switch)
        spine_names[r] = min(spine_names.get(r, name), name)
    places: dict[int, Place] = {}
    for server_id, leaf in leaves.items():
        spine = spine_label = None
        if leaf[2] in parent:
            r = root(leaf[2])
            spine, spine_label = f"spine:{r}", spine_names.get(r, "")
        places[server_id] = Place(
            leaf=leaf[0],
            spine=spine,
            leaf_name=leaf[1],
            spine_name=f"spines from {spine_label}" if spine_label else "",
        )
    return places


def nvlink_domains_of_servers() -> dict[int, str]:
    """Server id -> its NVLink domain (`cluster_uuid/clique`), the fabric's one rule: the
    domain most of its GPUs report (one query over the GPUs of a domain, few)."""
    from fabric.graph import nvlink_domains

    gpus = (
        (str(server_id), cluster_uuid, clique)
        # "> ''" and not "<> ''": the index skips the GPUs of no NVLink domain (most)
        for server_id, cluster_uuid, clique in Gpu.objects.filter(fabric_cluster_uuid__gt="")
        .exclude(status=GpuStatus.LOST)
        .order_by()
        .values_list("server_id", "fabric_cluster_uuid", "fabric_clique_id")
    )
    return {  # the fabric's one rule: the domain most of a server's GPUs report
        int(host): f"{cluster_uuid}/{clique}"
        for (cluster_uuid, clique), hosts in nvlink_domains(gpus).items()
        for host in hosts
    }


def leaf_rows() -> tuple[str | None, list[LeafSummary]]:
    """The stored leaf summaries (`placement.LeafPlacement`) and the fabric revision they were
    built from (None: never built). One query."""
    from .models import LeafPlacement

    stamp: str | None = None
    leaves: list[LeafSummary] = []
    for (
        leaf,
        leaf_name,
        spine,
        spine_name,
        servers,
        row_stamp,
    ) in LeafPlacement.objects.order_by().values_list(
        "leaf", "leaf_name", "spine", "spine_name", "servers", "stamp"
    ):
        if not leaf:
            stamp = row_stamp
            continue
        leaves.append(
            LeafSummary(leaf, leaf_name, spine or None, spine_name, tuple(json.loads(servers)))
        )
    return stamp, leaves


def fabric_revision() -> str:
    """The fabric revision as the leaf summaries are stamped with it (one query)."""
    from inventory.services import revision_get

    return str(revision_get(name="fabric"))


def fleet_places() -> dict[int, Place]:
    """Where every server bound to a fabric sits: its leaf (or leaf group), spine group and
    NVLink domain (`locality`). Three queries: the fabric revision, the leaf summaries (a row
    per leaf, `placement.leaves`), the GPUs of NVLink domains; never a cable while the
    summaries are of the current revision, else the cables (`cable_places`: answers never
    depend on whether the summaries are fresh).

    A leaf group (the rail leaves of one scalable unit) counts as one leaf: NIC k of each of
    its servers meets NIC k of the others on leaf k. A spine group is what the leaves reach
    through switches of tier 2 and below. A server cabled to several leaf groups (a miswired
    one) takes the lowest.
    """
    revision = fabric_revision()
    stamp, leaves = leaf_rows()
    if stamp != revision:
        leaves = leaf_summaries(cable_places())
    return places_from(leaves, nvlink_domains_of_servers())


# Workloads: what holds the GPUs, for placement's answers and the workloads' verdicts --------


class _IndexList(Aggregate):
    """The group's values as one comma-separated text (NULLs left out): `string_agg` on
    PostgreSQL, `group_concat` on SQLite."""

    function = "STRING_AGG"
    template = "%(function)s(CAST(%(expressions)s AS TEXT), ',')"
    output_field = TextField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return super().as_sql(
            compiler, connection, function="GROUP_CONCAT", template="%(function)s(%(expressions)s)"
        )


class _Bit(Func):
    """`1 << value` as a 64-bit integer."""

    template = "(CAST(1 AS BIGINT) << %(expressions)s)"
    output_field = BigIntegerField()


def _open_allocations(scope: QuerySet[Node] | None) -> QuerySet:
    """The whole-GPU allocations held now (`until` null) on nodes (in `scope`)."""
    from workloads.models import Allocation

    # "no MIG device" through a function of the column: SQLite otherwise walks the index of
    # mig_device_id for IS NULL, which every row matches (twice the time of a scan of the
    # table for the held GPUs; for a few nodes' it skips the index of node_id)
    allocations = Allocation.objects.alias(mig=Coalesce("mig_device_id", Value(0))).filter(
        until__isnull=True, node__isnull=False, mig=0
    )
    if scope is not None:
        allocations = allocations.filter(node_id__in=scope.values("id"))
    return allocations.order_by()


def held_gpus(scope: QuerySet[Node] | None = None) -> dict[int, HeldOnNode]:
    """Node id -> the GPUs running workloads hold there now (`workloads.Allocation`, `until`
    null): the indices (the GPU row's index where joined, else the scheduler's) as the bits of
    one integer (`HeldOnNode.mask`: the database sums each index's bit once) and how many are
    held by count alone. One query, one row per node holding GPUs (the database groups the
    allocations: at 25,000 servers a row per held GPU was 194,220 rows per question, and a
    text of the indexes per node, parsed into a set, cost more than the query); which
    workloads hold them is read for the few nodes an answer names (`held_workloads`). MIG
    devices are left out (a GPU in MIG mode is no whole GPU to offer).

    Read as one sum a node (`_held_packed`: its rows counted above the bits of their indexes,
    no DISTINCT, no other aggregate: 44 -> 35 ms at 25,000 servers on SQLite); only the nodes
    whose sum does not tell them exactly (an index held twice, one of `PACKED_BITS` or more,
    GPUs held by count alone) are read again, exactly (`_held_exact`)."""
    held: dict[int, HeldOnNode] = {}
    again: list[int] = []
    low = (1 << PACKED_BITS) - 1
    for node_id, packed, count in _rows(_held_packed(scope)):
        packed = int(packed)  # PostgreSQL sums to a numeric
        mask = packed & low
        if packed >> PACKED_BITS == count == mask.bit_count():  # each row a distinct index
            held[node_id] = HeldOnNode(mask, 0)
        else:
            again.append(node_id)
    if again:
        exact = _open_allocations(scope)
        if len(again) <= IN_LIST_LIMIT:
            exact = exact.filter(node_id__in=again)
        held.update(_held_exact(exact))
    return held


PACKED_BITS = 32
"""A held index below this is a bit of `_held_packed`'s sum, the rows counted above them (a
signed 64-bit sum never overflows: 2**31 rows a node)."""


def _held_packed(scope: QuerySet[Node] | None) -> QuerySet:
    """Node id -> the sum over its open allocations of (1 << 32) + (1 << index) (0 for a row
    without an index below `PACKED_BITS`), and its rows: where the sum's upper half, its rows
    and its lower half's bits agree, each row held another index, the bits."""
    return (
        _open_allocations(scope)
        .annotate(held_index=Coalesce("gpu__index", "index", output_field=IntegerField()))
        .annotate(
            packed=Case(
                When(held_index__lt=PACKED_BITS, then=_Bit("held_index") + (1 << PACKED_BITS)),
                default=Value(0),
                output_field=BigIntegerField(),
            )
        )
        .values("node_id")
        .annotate(total=Sum("packed"), rows=Count("id"))
        .values_list("node_id", "total", "rows")
    )


def _held_exact(allocations: QuerySet) -> dict[int, HeldOnNode]:
    """`held_gpus` of the nodes of `allocations` (`_open_allocations`), exactly: each index's
    bit summed once, the GPUs held by count alone, the indexes past the bits."""
    rows = _rows(  # as the database gives them (`_rows`: ids, integers need no converter)
        allocations.annotate(
            held_index=Coalesce("gpu__index", "index", output_field=IntegerField())
        )
        .annotate(
            held_bit=Case(
                When(held_index__lt=MASK_BITS, then=_Bit("held_index")),
                output_field=BigIntegerField(),
            ),
            held_beyond=Case(
                When(held_index__gte=MASK_BITS, then=F("held_index")),
                output_field=IntegerField(),
            ),
        )
        .values("node_id")
        .annotate(
            mask=Sum("held_bit", distinct=True),
            uncounted=Count("id", filter=Q(held_index__isnull=True)),
            beyond=_IndexList("held_beyond"),
        )
        .values_list("node_id", "mask", "uncounted", "beyond")
    )
    return {
        node_id: HeldOnNode(
            int(mask or 0),  # PostgreSQL sums to a numeric
            uncounted,
            frozenset(int(i) for i in beyond.split(",")) if beyond else frozenset(),
        )
        for node_id, mask, uncounted, beyond in rows
    }


def held_workloads(node_ids: Iterable[int]) -> dict[int, dict[int, int]]:
    """Node id -> {workload id: GPUs it holds there now} for the `node_ids` (one query, none
    without ids)."""
    wanted = set(node_ids)
    found: dict[int, dict[int, int]] = {}
    if not wanted:
        return found
    for node_id, workload_id, gpus in (
        _open_allocations(None)
        .filter(node_id__in=wanted)
        .values("node_id", "workload_id")
        .annotate(gpus=Count("id"))
        .values_list("node_id", "workload_id", "gpus")
    ):
        found.setdefault(node_id, {})[workload_id] = gpus
    return found


def workload_labels(ids: Iterable[int]) -> dict[int, tuple[str, str, str]]:
    """Workload id -> (kind, scheduler id, user), for the few an answer names (one query, none
    without ids)."""
    from workloads.models import Workload

    wanted = set(ids)
    if not wanted:
        return {}
    return {
        pk: (kind, scheduler_id, user)
        for pk, kind, scheduler_id, user in Workload.objects.filter(pk__in=wanted).values_list(
            "pk", "kind", "scheduler_id", "user"
        )
    }


class WorkloadRow(NamedTuple):
    """A running workload as its verdict reads it (`running_workloads`)."""

    id: int
    cluster: str
    cluster_kind: str
    started_at: Any
    node_count: int
    gpus_per_node: int | None
    gpu_models: list[str]
    judged_digest: str


class AllocationRow(NamedTuple):
    """One GPU a workload holds or held: on which node, which GPU, from when until when."""

    workload_id: int
    node_id: int | None
    node_name: str
    server_id: int | None
    gpu_id: int | None
    gpu_index: int | None
    model: str
    since: Any
    until: Any


def running_workloads() -> list[WorkloadRow]:
    """Running workloads of more than one GPU, with the digest of their last judgement (one
    query)."""
    from workloads.choices import WorkloadState
    from workloads.models import Workload

    rows = (
        Workload.objects.filter(state=WorkloadState.RUNNING, gpu_count__gt=1)
        .order_by("id")
        .values_list(
            "id",
            "cluster__name",
            "cluster__kind",
            "started_at",
            "node_count",
            "gpus_per_node",
            "gpu_models",
            Coalesce(KT("locality__judged_digest"), Value(""), output_field=TextField()),
        )
    )
    return [WorkloadRow(*row) for row in rows]


def workload_allocations(*, since_before: Any = None) -> list[AllocationRow]:
    """The whole-GPU allocations the verdicts read (one query): those of running workloads
    held now, and with `since_before` (the earliest start judged) every allocation alive at
    some moment after it: what the fleet had taken at each workload's start."""
    from workloads.choices import WorkloadState
    from workloads.models import Allocation

    alive = Q(until__isnull=True, workload__state=WorkloadState.RUNNING)
    if since_before is not None:
        alive |= Q(until__gt=since_before)
    rows = (
        Allocation.objects.filter(alive, mig_device__isnull=True)
        .order_by()
        .values_list(
            "workload_id",
            "node_id",
            "node_name",
            Coalesce("server_id", "node__server_id"),
            "gpu_id",
            Coalesce("gpu__index", "index", output_field=IntegerField()),
            Coalesce("gpu__name", "gpu_type", output_field=TextField()),
            "since",
            "until",
        )
    )
    return [AllocationRow(*row) for row in rows]


def server_networks(server_ids: Iterable[int]) -> tuple[dict[int, float], dict[int, set[int]]]:
    """Per server: the Gb/s of its NICs' fabric links that are up, and the rails its adapters
    are on (one query, none without servers)."""
    from fabric.choices import LinkState
    from fabric.models import FabricLink

    wanted = set(server_ids)
    gbps: dict[int, float] = defaultdict(float)
    rails: dict[int, set[int]] = defaultdict(set)
    if not wanted:
        return {}, {}
    for server_id, speed, rail in (
        FabricLink.objects.filter(
            gone_at__isnull=True, state=LinkState.UP, b_adapter__server_id__in=wanted
        )
        .order_by()
        .values_list("b_adapter__server_id", "gbps", "b_adapter__rail")
    ):
        gbps[server_id] += speed or 0.0
        if rail is not None:
            rails[server_id].add(rail)
    return dict(gbps), dict(rails)


def gpus_with_pix_nic(server_ids: Iterable[int]) -> dict[int, set[int]]:
    """Server id -> the ids of its GPUs with a NIC at PIX distance (one query; none without
    servers). A server absent knows no NIC affinity."""
    wanted = set(server_ids)
    found: dict[int, set[int]] = {}
    if not wanted:
        return found
    for server_id, gpu_id in (
        Link.objects.filter(server_id__in=wanted, nic__isnull=False)
        .order_by()
        .values_list(
            "server_id",
            Case(When(link_class="PIX", then=F("gpu_a_id")), output_field=IntegerField()),
        )
        .distinct()
    ):
        found.setdefault(server_id, set())
        if gpu_id is not None:
            found[server_id].add(gpu_id)
    return found
