"""Reconciliation: bind scheduler nodes to servers, and raise findings where layers disagree.

Set-based: the fleet is read in a handful of aggregate queries into typed facts
(`clusters.rules.types`), bound and judged in memory by the rules of `clusters.rules.registry`
(pure functions, no queries), and written back in bulk: a fixed number of queries per 2,000
changed rows, never one per node. A full pass judges only what changed since the last one
(`clusters.judged`: digests of each server's and node's rule inputs, compared in SQL), and
everything when forced, on a changed identity, cluster, hardware profile or code, or past
`CHANGES_MOST` changes: 25,000 servers against 50,000 nodes are judged whole in a few
seconds, and a quiet pass costs about 2.5x reading them.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from operator import attrgetter
from typing import Any, NamedTuple

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.db.models import Count, Exists, F, JSONField, Min, OuterRef, Q, QuerySet, Window
from django.db.models.functions import Lower, RowNumber
from django.utils import timezone

from agent.mig import normalize_mig_profile
from findings.choices import Family, FindingType, family_q
from findings.facts import FindingFact
from findings.models import OPEN, Finding
from findings.services import findings_write
from inventory.choices import GpuStatus
from inventory.health import HEALTH_FIELDS, gpu_health
from inventory.identity import short_hostname
from inventory.models import Gpu, GpuClaim, HardwareProfile, MigDevice, Server
from inventory.selectors import hardware_profile_for
from inventory.services import revision_get

from .choices import BindingMethod, ClusterKind
from .fact_columns import IDENTITY_COLUMNS, NODE_COLUMNS, SERVER_COLUMNS
from .judged import (
    Changes,
    changes,
    globals_now,
    judged_facts,
    judged_save,
    judged_versions,
    rules_to_judge_again,
    versions_of,
)
from .models import Cluster, Node, ReconcileState
from .parsers.records import GresRecord
from .rules.cluster import SKEW_NAMES_MOST, skew_findings
from .rules.counts import SHARED_GPU_RESOURCE
from .rules.declared import clusters_by_name, declared_index, declared_server, node_key
from .rules.registry import (
    LOCATION_RULES,
    NODE_FINDING_TYPES,
    NODE_RULES,
    SERVER_FINDING_TYPES,
    SERVER_NODES_RULES,
    SERVER_RULES,
    evaluate,
)
from .rules.types import (
    ClaimedGpu,
    Fleet,
    HardwareProfileFacts,
    NodeFacts,
    ResourceCount,
    ServerFacts,
)

logger = logging.getLogger(__name__)


@dataclass
class ReconcileResult:
    nodes: int = 0
    servers: int = 0
    bound: int = 0
    bindings_changed: int = 0
    findings_open: int = 0
    findings_raised: int = 0
    findings_resolved: int = 0
    duration_ms: int = 0
    full: bool = True
    """False when only what changed since the last full pass was judged."""
    judged_servers: int = 0
    judged_nodes: int = 0


CHANGES_MOST = 2000
"""Past this many changed servers or nodes, a pass judges everything: as fast by then."""


def reconcile_all(*, now=None, force: bool = False) -> ReconcileResult:
    """Bind every active node and refresh every finding, in one transaction.

    Only the servers and nodes whose rule inputs changed since the last pass are judged
    (`clusters.judged`), with the whole fleet loaded when a server's identity, a cluster, a
    hardware profile or the code changed, when too much changed, or when `force` says so: the
    findings and bindings are those a pass judging everything gives, either way.
    """
    started = time.monotonic()
    now = now or timezone.now()
    result = ReconcileResult()
    inventory_rev, nodes_rev = revision_get(name="inventory"), revision_get(name="nodes")
    stale_before, offline_before = _ages(now)
    with transaction.atomic():
        # One reconciliation at a time: a second waits here, then sees the first's work.
        state, _ = ReconcileState.objects.select_for_update().get_or_create(id=1)
        changed = changes(stale_before=stale_before, offline_before=offline_before)
        clusters = dict(Cluster.objects.values_list("id", "name"))
        judged_globals = globals_now(clusters)
        whole = (
            force
            or changed.identities
            or judged_globals != state.judged_globals
            or len(changed.servers) + len(changed.nodes) + len(changed.vanished) > CHANGES_MOST
        )
        judged = None
        if not whole and changed:
            judged = _judge_changes(result, changed, clusters, now)
            # None: a changed node is one a server declares; binding it reads every cluster.
            whole = judged is None
            result.full = whole
        if whole:
            bindings, moved, versions = _judge_all(result, clusters, now)
            facts = changed.nodes | judged_facts([i for i in moved if i not in changed.nodes])
            nodes = {i: (f, *bindings[i]) for i, f in facts.items() if i in bindings}
        elif judged is not None:
            nodes, versions = judged
        else:
            nodes, versions = {}, {}
            result.full = False
        judged_save(
            servers=changed.servers,
            versions=versions,
            nodes=nodes,
            vanished=changed.vanished,
            identities=changed.identities,
        )
        if not result.full:
            _count(result)
        result.duration_ms = int((time.monotonic() - started) * 1000)
        ReconcileState.objects.filter(id=1).update(
            inventory_revision=inventory_rev,
            nodes_revision=nodes_rev,
            reconciled_at=now,
            duration_ms=result.duration_ms,
            judged_globals=judged_globals,
        )
    logger.info("reconciled %s", result)
    return result


def _judge_all(
    result: ReconcileResult, clusters: dict[int, str], now
) -> tuple[dict[int, tuple[int | None, str]], set[int], dict[int, str]]:
    """The whole fleet loaded, bound and judged. Returns every node's binding, the nodes
    whose binding changed, and every server's `versions_of`."""
    servers = _load_servers()
    nodes = _load_nodes(clusters)
    result.servers, result.nodes = len(servers), len(nodes)
    nodes, moved, ambiguous = _bind(nodes, servers, now)
    result.bindings_changed = len(moved)
    result.bound = sum(1 for n in nodes if n.server_id)
    result.judged_servers, result.judged_nodes = len(servers), len(nodes)
    fleet = _fleet(nodes, servers, clusters, now, ambiguous=ambiguous)
    desired, gone = _of_live_clusters(evaluate(fleet), fleet)
    # The scheduler layer answers for its own family only: health and fabric write theirs.
    raised, resolved, open_count = findings_write(
        desired=desired, now=now, family=Family.RECONCILIATION
    )
    result.findings_raised, result.findings_resolved = raised, resolved
    result.findings_open = open_count
    bindings = {n.id: (n.server_id, n.binding_method) for n in nodes if n.cluster_id not in gone}
    return bindings, set(moved), {i: versions_of(fleet, s) for i, s in servers.items()}


def _judge_changes(
    result: ReconcileResult, changed: Changes, clusters: dict[int, str], now
) -> tuple[dict[int, tuple[str, int | None, str]], dict[int, str]] | None:
    """Bind the changed nodes again, and judge the servers whose facts or nodes changed (with
    their hosts, VMs and the servers claiming their GPUs) and the changed nodes, by the rules
    that read no more than that; then the clusters' driver versions, from one aggregate query,
    when a node or a server's versions changed, and each of `LOCATION_RULES` over the fleet's
    addresses and racks (one query) when what it reads of a changed server changed.

    No server identity changed (else the whole fleet is judged), so the other nodes' bindings
    and the findings comparing identities across the fleet stand. Returns the changed nodes'
    digests and bindings and the changed servers' `versions_of`, to store.

    Or None, having written nothing, when a changed node's declared name is held in more than
    one cluster, or a node vanished while a server declares any: whether a declaration binds
    reads the names of every cluster, and nodes not loaded here may bind otherwise now. None
    too when a node bound by name or address to a changed server, or to one sharing its name
    or address, matches several servers: whether each is live decides `ambiguous_nodes` of
    nodes not loaded here (rare: a copied identity)."""
    result.full = False
    nodes = _load_nodes(clusters, node_ids=list(changed.nodes))
    ambiguous: dict[int, frozenset[int]] = {}
    declaring: set[int] = set()
    identities = _load_identities() if nodes or changed.servers else {}
    if _contested(changed.servers.keys(), identities, clusters):
        return None
    if nodes:
        declared = declared_index(identities.values())
        if changed.vanished and declared:
            return None
        keys = {node_key(n.kind, n.name) for n in nodes} & declared.keys()
        named = _clusters_named(keys) if keys else Counter()
        if any(count > 1 for count in named.values()):
            return None
        declaring = {i for key in keys for i in declared[key]}
        nodes, moved, ambiguous = _bind(nodes, identities, now, named=named)
        result.bindings_changed = len(moved)
    elif changed.vanished and _anything_declared():
        return None
    node_ids = set(changed.nodes) | set(changed.vanished)
    server_ids = set(changed.servers) | {s for s in changed.left.values() if s}
    server_ids |= {n.server_id for n in nodes if n.server_id}
    server_ids |= _claimants_of(changed.servers)
    judged = _with_hosts_and_vms(server_ids)
    # The servers a node's identity matched, and those declaring it (`declared_node_conflict`
    # names them), are read beside the judged ones.
    also = {i for found in ambiguous.values() for i in found} | declaring
    fleet = _server_fleet(judged, clusters, now, nodes=nodes, also=also, ambiguous=ambiguous)
    servers = fleet.servers
    result.judged_servers, result.judged_nodes = len(judged & servers.keys()), len(node_ids)
    desired = {
        key: finding
        for key, finding in evaluate(fleet, SERVER_RULES + SERVER_NODES_RULES).items()
        if finding.server_id in judged
    }
    desired |= {
        key: finding
        for key, finding in evaluate(fleet, NODE_RULES).items()
        if finding.node_id in node_ids
    }
    scope = (
        Q(type__in=SERVER_FINDING_TYPES, server_id__in=judged)
        | Q(
            type=FindingType.DUPLICATE_IDENTITY,
            subject__startswith="cluster:",
            server_id__in=judged,
        )
        | Q(type__in=NODE_FINDING_TYPES, subject__startswith="node:", node_id__in=node_ids)
    )
    versions = {i: versions_of(fleet, servers[i]) for i in changed.servers if i in servers}
    again = rules_to_judge_again(versions, judged_versions(versions))
    if node_ids or FindingType.DRIVER_SKEW in again:
        desired |= {f.key: f for f in _driver_skew(clusters)}
        scope |= Q(type=FindingType.DRIVER_SKEW)
    located = tuple(rule for rule in LOCATION_RULES if rule.__name__ in again)
    if located:
        desired |= evaluate(_location_fleet(now), located)
        scope |= Q(type__in=[rule.__name__ for rule in located])
    desired, gone = _of_live_clusters(desired, fleet)
    result.findings_raised, result.findings_resolved, _ = findings_write(
        desired=desired, now=now, family=Family.RECONCILIATION, scope=scope
    )
    bindings = {
        n.id: (changed.nodes[n.id], n.server_id, n.binding_method)
        for n in nodes
        if n.cluster_id not in gone
    }
    return bindings, versions


def _contested(
    server_ids: Collection[int], identities: Mapping[int, Any], clusters: dict[int, str]
) -> bool:
    """Whether a node bound by name or address to one of these servers, or to a server sharing
    a name or address with one, matches several: one query, only where a name is shared."""
    if not server_ids:
        return False
    ids = set(server_ids)
    index = _index(identities.values())
    sharing = {
        i
        for table in ("fqdn", "short", "addr")
        for found in index[table].values()
        if len(found) > 1 and not ids.isdisjoint(found)
        for i in found
    }
    if not sharing:
        return False
    return any(
        len(binding_for(node, index)[0]) > 1
        for node in _load_nodes(clusters, server_ids=sharing)
        if node.binding_method in WEAK_METHODS
    )


def _clusters_named(keys: Collection[tuple[str, str]]) -> Counter[tuple[str, str]]:
    """How many clusters hold a live node of each (kind, lower-case name): one query."""
    names = {name for _, name in keys}
    rows = (
        Node.objects.filter(gone_at__isnull=True)
        .annotate(lower_name=Lower("name"))
        .filter(lower_name__in=names)
        .order_by()
        .values_list("kind", "lower_name", "cluster_id")
        .distinct()
    )
    return Counter((kind, name) for kind, name, _ in rows if (kind, name) in keys)


def _anything_declared() -> bool:
    """Whether any server declares a scheduler node: one query."""
    return (
        Server.objects.exclude(declared_kubernetes_node="", declared_slurm_node="")
        .order_by()
        .exists()
    )


def _ages(now) -> tuple[Any, Any]:
    """The times before which an agent is stale, and a server offline."""
    return (
        now - timedelta(seconds=settings.ATLAS_SERVER_STALE_AFTER_S),
        now - timedelta(seconds=settings.ATLAS_SERVER_OFFLINE_AFTER_S),
    )


def _claimants_of(server_ids: Collection[int]) -> set[int]:
    """The servers claiming GPUs these servers hold (their findings name the holder)."""
    if not server_ids:
        return set()
    claims = GpuClaim.objects.filter(gpu__server_id__in=list(server_ids)).order_by()
    return set(claims.values_list("server_id", flat=True))


def _of_live_clusters(
    desired: dict[tuple[str, str], FindingFact], fleet: Fleet
) -> tuple[dict[tuple[str, str], FindingFact], set[int]]:
    """The findings to write less those of a cluster deleted since the pass read the clusters
    (its nodes and findings went with it: a finding naming them would break a foreign key),
    and the ids of those clusters: one query, just before the pass writes.

    A cluster deleted later still, while the pass writes, fails its commit on a foreign key;
    the task tries again (`clusters.tasks.reconcile`), and that pass no longer sees it."""
    live = set(Cluster.objects.filter(id__in=list(fleet.clusters)).values_list("id", flat=True))
    gone = fleet.clusters.keys() - live
    if not gone:
        return desired, gone
    nodes_gone = {n.id for n in fleet.nodes if n.cluster_id in gone}
    kept = {
        key: fact
        for key, fact in desired.items()
        if fact.cluster_id not in gone and fact.node_id not in nodes_gone
    }
    return kept, gone


def _count(result: ReconcileResult) -> None:
    """The fleet's totals, for a pass that judged only what changed."""
    live = Node.objects.filter(gone_at__isnull=True)
    totals = live.aggregate(nodes=Count("id"), bound=Count("id", filter=Q(server__isnull=False)))
    result.nodes, result.bound = totals["nodes"], totals["bound"]
    result.servers = Server.objects.count()
    result.findings_open = (
        Finding.objects.filter(family_q(Family.RECONCILIATION)).filter(OPEN).count()
    )


def _driver_skew(clusters: dict[int, str]) -> list[FindingFact]:
    """`driver_skew` from one aggregate over the bound nodes of GPU servers, each version
    counted in the order its first node comes, as the rule counts them over the fleet."""
    gpus = Gpu.objects.filter(server_id=OuterRef("server_id")).exclude(status=GpuStatus.LOST)
    rows = (
        Node.objects.filter(gone_at__isnull=True, server__isnull=False)
        .filter(Exists(gpus), cluster_id__in=list(clusters))
        .order_by()
        .values_list("cluster_id", "server__driver_version", "server__cuda_version")
        .annotate(n=Count("id"), first=Min("id"))
    )
    firsts: dict[tuple[str, int, str], int] = {}
    counts: Counter[tuple[str, int, str]] = Counter()
    for cluster_id, driver, cuda, n, first in rows:
        for table, version in (("driver", driver), ("cuda", cuda)):
            if version:
                key = (table, cluster_id, version)
                counts[key] += n
                firsts[key] = min(firsts.get(key, first), first)
    tables: dict[str, dict[int, Counter[str]]] = {"driver": {}, "cuda": {}}
    for table, cluster_id, version in sorted(firsts, key=firsts.__getitem__):
        versions = tables[table].setdefault(cluster_id, Counter())
        versions[version] = counts[table, cluster_id, version]
    skewed = {
        (t, c) for t, by_cluster in tables.items() for c, v in by_cluster.items() if len(v) > 1
    }
    names = _skew_names(skewed) if skewed else {}
    return skew_findings(tables["driver"], tables["cuda"], clusters, names)


def _location_fleet(now) -> Fleet:
    """The fleet as `LOCATION_RULES` read it: the name, addresses, age and rack place of every
    server live or racked (the others they leave out), in one query."""
    stale_before, offline_before = _ages(now)
    columns = (
        "id",
        "hostname",
        "addresses",
        "last_seen",
        "vendor",
        "product",
        "is_virtual",
        "rack",
        "rack_position",
    )
    servers = Server.objects.order_by().filter(
        Q(last_seen__gte=offline_before) | (~Q(rack="") & Q(rack_position__isnull=False))
    )
    values = _columns(servers, columns, decode={"addresses": _tuple})
    return Fleet(
        nodes=(),
        servers={
            row[0]: ServerFacts(**dict(zip(columns, row, strict=True)))
            for row in zip(*values, strict=True)
        },
        now=now,
        stale_before=stale_before,
        offline_before=offline_before,
    )


def _skew_names(skewed: set[tuple[str, int]]) -> dict[tuple[str, int, str], list[str]]:
    """The first `SKEW_NAMES_MOST` hostnames (then node ids) on each version of the skewed
    (table, cluster) pairs, as `driver_skew` names them: one windowed query per table, at most
    that many rows per version whatever the fleet."""
    gpus = Gpu.objects.filter(server_id=OuterRef("server_id")).exclude(status=GpuStatus.LOST)
    names: dict[tuple[str, int, str], list[str]] = defaultdict(list)
    for table in sorted({t for t, _ in skewed}):
        column = f"server__{table}_version"
        rows = (
            Node.objects.filter(gone_at__isnull=True, server__isnull=False)
            .filter(Exists(gpus), cluster_id__in=sorted(c for t, c in skewed if t == table))
            .exclude(**{column: ""})
            .annotate(
                rank=Window(
                    RowNumber(),
                    partition_by=[F("cluster_id"), F(column)],
                    order_by=[F("server__hostname").asc(), F("id").asc()],
                )
            )
            .filter(rank__lte=SKEW_NAMES_MOST)
            .order_by("server__hostname", "id")
            .values_list("cluster_id", column, "server__hostname")
        )
        for cluster_id, version, hostname in rows:
            names[table, cluster_id, version].append(hostname)
    return names


def reconcile_servers(*, server_ids: Collection[int], now=None) -> ReconcileResult:
    """Refresh the findings of a few servers and of the nodes bound to them, in milliseconds
    whatever the fleet: after a report or a snapshot that touched only these.

    Judged: the servers, the VMs and host of each (a host is in a scheduler through its bound
    VMs), and their bound nodes, by the rules that read no more than that
    (`SERVER_RULES`; servers holding GPUs they claim are read too). Bindings, duplicate
    identities, nodes without a server and version skew stay with the full pass
    (`reconcile_all`), which also remains the periodic safety net.
    """
    started = time.monotonic()
    now = now or timezone.now()
    result = ReconcileResult()
    with transaction.atomic():
        ReconcileState.objects.select_for_update().get_or_create(id=1)
        judged = _with_hosts_and_vms(set(server_ids))
        clusters = dict(Cluster.objects.values_list("id", "name"))
        fleet = _server_fleet(judged, clusters, now)
        result.servers, result.nodes = len(judged & fleet.servers.keys()), len(fleet.nodes)
        result.bound = len(fleet.nodes)
        desired = {
            key: finding
            for key, finding in evaluate(fleet, SERVER_RULES).items()
            if finding.server_id in judged
        }
        desired, _ = _of_live_clusters(desired, fleet)
        scope = Q(type__in=SERVER_FINDING_TYPES, server_id__in=judged)
        raised, resolved, open_count = findings_write(
            desired=desired, now=now, family=Family.RECONCILIATION, scope=scope
        )
        result.findings_raised, result.findings_resolved = raised, resolved
        result.findings_open = open_count
    result.duration_ms = int((time.monotonic() - started) * 1000)
    return result


def _server_fleet(
    judged: set[int],
    clusters: dict[int, str],
    now,
    *,
    nodes: Iterable[NodeFacts] = (),
    also: Collection[int] = (),
    ambiguous: dict[int, frozenset[int]] | None = None,
) -> Fleet:
    """The rules' view of the judged servers: them with their bound nodes (`nodes`, bound
    again, in place of theirs), and read beside them for their names and age the servers
    holding GPUs they claim and `also`."""
    servers = _load_servers(judged)
    others = ({c.holder_id for s in servers.values() for c in s.gpu_claims} | set(also)) - set(
        servers
    )
    if others:  # rare
        servers |= _load_servers(others)
    by_id = {n.id: n for n in _load_nodes(clusters, server_ids=judged)}
    by_id |= {n.id: n for n in nodes}
    return _fleet(sorted(by_id.values(), key=attrgetter("id")), servers, clusters, now, ambiguous)


def _with_hosts_and_vms(ids: set[int]) -> set[int]:
    """The servers, their physical hosts, and every VM of those hosts and servers: one query,
    two where a server is a VM (its host's other VMs)."""
    found = Server.objects.filter(Q(id__in=ids) | Q(physical_host_id__in=ids)).order_by()
    rows = list(found.values_list("id", "physical_host_id"))
    hosts = {host for server_id, host in rows if server_id in ids and host} - ids
    if hosts:
        siblings = Server.objects.filter(Q(id__in=hosts) | Q(physical_host_id__in=hosts))
        rows += siblings.order_by().values_list("id", "physical_host_id")
    return ids | {server_id for server_id, _ in rows}


def _fleet(
    nodes: list[NodeFacts],
    servers: dict[int, ServerFacts],
    clusters: dict[int, str],
    now,
    ambiguous: dict[int, frozenset[int]] | None = None,
) -> Fleet:
    """The rules' view: bound nodes, servers, their profiles, and now's stale/offline times."""
    stale_before, offline_before = _ages(now)
    return Fleet(
        nodes=tuple(nodes),
        servers=servers,
        now=now,
        stale_before=stale_before,
        offline_before=offline_before,
        clusters=clusters,
        ambiguous=ambiguous or {},
        profiles=_load_profiles(servers),
    )


def reconcile_needed() -> bool:
    """True when the inventory or a node set moved since the last reconciliation."""
    state = (
        ReconcileState.objects.filter(id=1).values("inventory_revision", "nodes_revision").first()
    )
    if state is None:
        return True
    return state["inventory_revision"] != revision_get(name="inventory") or state[
        "nodes_revision"
    ] != revision_get(name="nodes")


# Loading ------------------------------------------------------------------------------


def _columns(
    queryset: QuerySet, columns: Sequence[str], decode: Mapping[str, Callable[[Any], Any]]
) -> list[list[Any]]:
    """The values of `queryset.values_list(*columns)`, column by column, converted as Django
    converts them, with each distinct value converted once.

    JSON text is decoded, then passed through `decode[column]`, once per distinct text and
    shared by every row holding that text (so `decode` returns values nobody mutates):
    thousands of nodes carry the same GRES, flags and resources, and decoding them row by row
    through Django's converters was most of a full pass.
    """
    compiler = queryset.values_list(*columns).query.get_compiler(using=queryset.db)
    try:
        sql, params = compiler.as_sql()
    except EmptyResultSet:  # `id__in=[]`
        return [[] for _ in columns]
    expressions = [selected[0] for selected in compiler.select[: compiler.col_count]]
    converters = compiler.get_converters(expressions)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    values = [list(column) for column in zip(*rows, strict=True)] or [[] for _ in columns]
    for pos, (convs, expression) in converters.items():
        if isinstance(expression.output_field, JSONField):
            then = decode.get(columns[pos], _same)
            convert = {text: then(_json(text)) for text in set(values[pos])}
        else:
            convert = {value: _converted(value, convs, expression) for value in set(values[pos])}
        values[pos] = list(map(convert.__getitem__, values[pos]))
    return values


def _same(value: Any) -> Any:
    return value


def _json(text: Any) -> Any:
    """What `JSONField.from_db_value` makes of a stored value."""
    if text is None or not isinstance(text, str | bytes | bytearray):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _converted(value: Any, converters: list, expression: Any) -> Any:
    for converter in converters:
        value = converter(value, expression, connection)
    return value


def _tuple(value: Any) -> tuple:
    return tuple(value or ())


def _load_servers(ids: Collection[int] | None = None) -> dict[int, ServerFacts]:
    """Every server (or those of `ids`) with its GPUs counted: one query per kind of fact,
    whatever the fleet."""
    servers, gpus = Server.objects.order_by(), Gpu.objects.order_by()
    migs, claims = MigDevice.objects.order_by(), GpuClaim.objects.order_by()
    if ids is not None:
        servers, gpus = servers.filter(id__in=ids), gpus.filter(server_id__in=ids)
        migs, claims = migs.filter(gpu__server_id__in=ids), claims.filter(server_id__in=ids)
    columns = _columns(servers, SERVER_COLUMNS, decode={"addresses": _tuple})
    rows = set(columns[0])
    live = ~Q(status=GpuStatus.LOST)
    counts = gpus.values("server_id").annotate(
        gpus=Count("id", filter=live),
        mig_gpus=Count("id", filter=live & Q(mig_mode_current=True)),
        mig_pending=Count(
            "id",
            filter=live
            & (
                Q(mig_mode_pending=True, mig_mode_current=False)
                | Q(mig_mode_pending=False, mig_mode_current=True)
            ),
        ),
    )
    counted = {
        server_id: counts
        for server_id, *counts in zip(
            *_columns(counts, ("server_id", "gpus", "mig_gpus", "mig_pending"), {}), strict=True
        )
    }
    names: dict[int, set[str]] = defaultdict(set)
    named = gpus.exclude(status=GpuStatus.LOST).exclude(name="").distinct()
    for server_id, name in zip(*_columns(named, ("server_id", "name"), {}), strict=True):
        names[server_id].add(name)
    unhealthy: dict[int, dict[str, Any]] = defaultdict(dict)
    for gpu in gpus.unhealthy().values("server_id", "uuid", *HEALTH_FIELDS):
        if gpu["server_id"] in rows:
            unhealthy[gpu["server_id"]][gpu["uuid"]] = gpu_health(gpu)
    mig_profiles: dict[int, Counter[str]] = defaultdict(Counter)
    for server_id, profile, n in (
        migs.exclude(gpu__status=GpuStatus.LOST)
        .values("gpu__server_id", "profile")
        .annotate(n=Count("id"))
        .values_list("gpu__server_id", "profile", "n")
    ):
        if server_id in rows:
            mig_profiles[server_id][normalize_mig_profile(profile) or "unknown"] += n
    gpu_claims: dict[int, list[ClaimedGpu]] = defaultdict(list)
    for server_id, uuid, mig_device_id, holder_id, serial in (
        claims.exclude(gpu__server_id=F("server_id"))
        .exclude(gpu__status=GpuStatus.LOST)
        .values_list("server_id", "uuid", "mig_device_id", "gpu__server_id", "gpu__serial")
    ):
        if server_id in rows:
            gpu_claims[server_id].append(ClaimedGpu(holder_id, uuid, serial or "", mig_device_id))
    # Facts are read, never changed: servers without MIG devices or GPU names share one empty
    # Counter and frozenset instead of 25,000 of each.
    no_names: frozenset[str] = frozenset()
    no_migs: Counter[str] = Counter()
    # Positional, in ServerFacts' field order: SERVER_COLUMNS, the counts, then the rest.
    return {
        row[0]: ServerFacts(
            *(
                *row,
                *counted.get(row[0], (0, 0, 0)),
                frozenset(names[row[0]]) if row[0] in names else no_names,
                mig_profiles.get(row[0], no_migs),
                tuple(gpu_claims.get(row[0], ())),
                unhealthy.get(row[0]) or {},
            )
        )
        for row in zip(*columns, strict=True)
    }


class ServerIdentity(NamedTuple):
    """What binding reads of a server (`IDENTITY_COLUMNS`)."""

    id: int
    hostname: str
    fqdn: str
    system_uuid: str | None
    machine_id: str | None
    addresses: tuple[str, ...]
    declared_kubernetes_node: str
    declared_slurm_node: str


def _load_identities() -> dict[int, ServerIdentity]:
    """Every server's identity, to bind a few nodes: one query."""
    columns = _columns(
        Server.objects.order_by(), ("id", *IDENTITY_COLUMNS), decode={"addresses": _tuple}
    )
    return {row[0]: ServerIdentity(*row) for row in zip(*columns, strict=True)}


def _load_profiles(servers: dict[int, ServerFacts]) -> dict[int, HardwareProfileFacts]:
    """Each server's hardware profile (set on it, else matched by DMI vendor and product)."""
    profiles = list(HardwareProfile.objects.all())
    if not profiles:
        return {}
    found = {}
    for s in servers.values():
        profile = hardware_profile_for(
            vendor=s.vendor, product=s.product, profile_id=s.profile_id, profiles=profiles
        )
        if profile is not None:
            found[s.id] = HardwareProfileFacts(
                id=profile.pk,
                name=profile.name,
                expected_gpu_count=profile.expected_gpu_count,
                expected_gpu_model=profile.expected_gpu_model,
            )
    return found


def _load_nodes(
    clusters: dict[int, str],
    server_ids: Collection[int] | None = None,
    node_ids: Collection[int] | None = None,
) -> list[NodeFacts]:
    """Every node that is not gone (or those bound to `server_ids`, or those of `node_ids`),
    as the rules see it, in id order: of `clusters` only, so the nodes of a cluster created
    since the pass read them wait for the next pass (the new cluster changes the globals)."""
    nodes = Node.objects.filter(gone_at__isnull=True, cluster_id__in=list(clusters)).order_by()
    if server_ids is not None:
        nodes = nodes.filter(server_id__in=server_ids)
    if node_ids is not None:
        nodes = nodes.filter(id__in=node_ids)
    (
        ids,
        cluster_ids,
        kinds,
        names,
        states,
        raw_states,
        state_flags,
        ready,
        schedulable,
        reasons,
        capacity,
        allocatable,
        used,
        gres,
        mig_resources,
        shared_gpus,
        products,
        replicas,
        mig_strategies,
        hostnames,
        addresses,
        system_uuids,
        machine_ids,
        server_ids_,
        methods,
    ) = _columns(nodes, NODE_COLUMNS, decode=NODE_JSON)
    facts = list(
        map(
            NodeFacts,
            ids,
            cluster_ids,
            map(clusters.__getitem__, cluster_ids),
            kinds,
            names,
            states,
            _text(raw_states),
            state_flags,
            ready,
            schedulable,
            _text(reasons),
            capacity,
            allocatable,
            used,
            gres,
            mig_resources,
            shared_gpus,
            _text(products),
            [max(r or 1, 1) for r in replicas],
            [(s or "").lower() for s in mig_strategies],
            _text(hostnames),
            addresses,
            system_uuids,
            machine_ids,
            server_ids_,
            methods,
        )
    )
    facts.sort(key=attrgetter("id"))
    return facts


def _text(values: list[str | None]) -> list[str]:
    return [v or "" for v in values]


def _gres(value: Any) -> tuple[GresRecord, ...]:
    return tuple(_gres_record(g) for g in value or ())


def _mig_resources(value: Any) -> dict[str, int]:
    return {normalize_mig_profile(k) or k: v for k, v in (value or {}).items()}


def _shared_gpus(resources: Any) -> ResourceCount | None:
    """The shared GPU resource (time-slicing, renameByDefault) among a node's extended
    resources."""
    shared = (resources or {}).get(SHARED_GPU_RESOURCE)
    if not shared:
        return None
    return ResourceCount(shared.get("capacity", 0), shared.get("allocatable", 0))


NODE_JSON: dict[str, Callable[[Any], Any]] = {
    "state_flags": _tuple,
    "gres": _gres,
    "mig_resources": _mig_resources,
    "resources": _shared_gpus,
    "addresses": _tuple,
}
"""How each JSON column of a node becomes its fact."""


def _gres_record(gres: dict[str, Any]) -> GresRecord:
    return GresRecord(
        name=gres.get("name") or "",
        type=gres.get("type"),
        count=gres.get("count") or 0,
        used=gres.get("used"),
        used_indexes=gres.get("used_indexes"),
        mig_profile=gres.get("mig_profile"),
    )


# Binding ------------------------------------------------------------------------------


def _index(
    servers: Iterable[ServerIdentity | ServerFacts],
) -> dict[str, dict[str, tuple[int, ...]]]:
    """Server ids by each name a node may know a server by, lower-case: system UUID
    (`uuid`), machine-id (`mid`), FQDN, short hostname and address. Tuples, not sets: nearly
    every name is one server's, and 25,000 servers make 100,000 of them."""
    uuids: dict[str, tuple[int, ...]] = {}
    mids: dict[str, tuple[int, ...]] = {}
    fqdns: dict[str, tuple[int, ...]] = {}
    shorts: dict[str, tuple[int, ...]] = {}
    addresses: dict[str, tuple[int, ...]] = {}

    def put(table: dict[str, tuple[int, ...]], key: str, server_id: int) -> None:
        found = table.get(key)
        if found is None:
            table[key] = (server_id,)
        elif server_id not in found:
            table[key] = (*found, server_id)

    for s in servers:
        if s.system_uuid:
            put(uuids, s.system_uuid.lower(), s.id)
        if s.machine_id:
            put(mids, s.machine_id.lower(), s.id)
        for name in (s.hostname, s.fqdn):
            name = (name or "").strip().lower().rstrip(".")
            if not name:
                continue
            if "." in name:
                put(fqdns, name, s.id)
            put(shorts, short_hostname(name), s.id)
        for address in s.addresses:
            put(addresses, address.strip().lower(), s.id)
    return {"uuid": uuids, "mid": mids, "fqdn": fqdns, "short": shorts, "addr": addresses}


def _match_names(names: Iterable[str], index) -> tuple[tuple[int, ...], str]:
    for name in names:
        name = (name or "").strip().lower().rstrip(".")
        if name and "." in name and name in index["fqdn"]:
            return index["fqdn"][name], BindingMethod.FQDN
    for name in names:
        short = short_hostname(name)
        if short and short in index["short"]:
            return index["short"][short], BindingMethod.HOSTNAME
    return (), BindingMethod.NONE


def binding_for(node: NodeFacts, index) -> tuple[tuple[int, ...], str]:
    """The servers a node's identity points at, and how (UUID, machine-id, names, addresses)."""
    if node.kind == ClusterKind.KUBERNETES:
        if node.system_uuid and node.system_uuid in index["uuid"]:
            return index["uuid"][node.system_uuid], BindingMethod.SYSTEM_UUID
        if node.machine_id and node.machine_id in index["mid"]:
            return index["mid"][node.machine_id], BindingMethod.MACHINE_ID
    names = [node.hostname, node.name]
    names += [a for a in node.addresses if not _is_ip(a)]
    found, method = _match_names(names, index)
    if found:
        return found, method
    for address in node.addresses:
        address = address.strip().lower()
        if address in index["addr"]:
            return index["addr"][address], BindingMethod.ADDRESS
    return (), BindingMethod.NONE


WEAK_METHODS = frozenset({BindingMethod.FQDN, BindingMethod.HOSTNAME, BindingMethod.ADDRESS})
"""Identities any agent can report of itself: a second server claiming one keeps the node on
the server it is bound to (and `ambiguous_nodes` names both), where a shared system UUID or
machine-id unbinds it."""


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address((value or "").strip())
    except ValueError:
        return False
    return True


def _bind(
    nodes: list[NodeFacts],
    servers: Mapping[int, ServerIdentity | ServerFacts],
    now,
    *,
    named: Counter[tuple[str, str]] | None = None,
) -> tuple[list[NodeFacts], dict[int, tuple[int | None, str]], dict[int, frozenset[int]]]:
    """Each node with its server set: a manual binding always wins, then the server that
    declares it is the node (`rules.declared.declared_server`), then its identity
    (`binding_for`). A node already bound to one of several servers its name or address
    matches stays on it (`WEAK_METHODS`); one matching several otherwise is bound to none.
    Returns the bound nodes, the bindings that changed (written here) and the nodes whose
    identity matched several servers (bound or not). `named` counts the clusters holding each
    declared name (`_clusters_named`); without it, `nodes` are every node and are counted."""
    index = _index(servers.values())
    declared = declared_index(servers.values())
    if named is None:
        named = clusters_by_name(nodes) if declared else Counter()
    ambiguous: dict[int, frozenset[int]] = {}
    changed: list[tuple[int, int | None, str, Any]] = []
    bound = []
    for node in nodes:
        if node.binding_method == BindingMethod.MANUAL and node.server_id in servers:
            bound.append(node)
            continue
        found, method = binding_for(node, index)
        if declared:
            key = node_key(node.kind, node.name)
            by_declaration = declared_server(node, declared, named[key], found)
            if by_declaration is not None:
                found, method = (by_declaration,), BindingMethod.DECLARED
        server_id = found[0] if len(found) == 1 else None
        if len(found) > 1:
            ambiguous[node.id] = frozenset(found)
            if method in WEAK_METHODS and node.server_id in found:
                # Another server's copy of a name or address never moves a bound node.
                server_id = node.server_id
            else:
                method = BindingMethod.NONE
        if (server_id, method) != (node.server_id, node.binding_method):
            node = replace(node, server_id=server_id, binding_method=method)
            changed.append((node.id, server_id, method, now if server_id else None))
        bound.append(node)
    _write_bindings(changed)
    moved = {node_id: (server_id, method) for node_id, server_id, method, _ in changed}
    return bound, moved, ambiguous


def _write_bindings(rows: list[tuple[int, int | None, str, Any]]) -> None:
    """Set (server, method, bound_at) of many nodes: one UPDATE .. FROM (VALUES ..) per batch.

    Django's bulk_update writes a CASE WHEN per row and, on SQLite, splits the batch into
    tens of rows; this is 4 parameters a row, 249 rows a statement on SQLite and 5,000 on
    PostgreSQL. (PostgreSQL and SQLite >= 3.33 both have UPDATE .. FROM.)
    """
    if not rows:
        return
    table = connection.ops.quote_name(Node._meta.db_table)
    rows = [(i, s, m, connection.ops.adapt_datetimefield_value(t)) for i, s, m, t in rows]
    if connection.vendor == "postgresql":
        size, value = 5000, "(%s::bigint, %s::bigint, %s::varchar, %s::timestamptz)"
        target, columns = (
            "v.server_id, v.method, v.bound_at",
            "AS v(id, server_id, method, bound_at)",
        )
        where = f"{table}.id = v.id"
    else:
        size = max(connection.ops.bulk_batch_size(["id", "server", "method", "at"], rows), 1)
        value, columns, where = "(%s, %s, %s, %s)", "AS v", f"{table}.id = v.column1"
        target = "v.column2, v.column3, v.column4"
    server, method, bound_at = target.split(", ")
    with connection.cursor() as cursor:
        for start in range(0, len(rows), size):
            batch = rows[start : start + size]
            # Identifiers come from the model; every value is a parameter.
            sql = (
                f"UPDATE {table} SET server_id = {server}, binding_method = {method}, "  # noqa: S608
                f"bound_at = {bound_at} FROM (VALUES {', '.join([value] * len(batch))}) "
                f"{columns} WHERE {where}"
            )
            cursor.execute(sql, [p for row in batch for p in row])
