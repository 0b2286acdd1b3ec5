"""Digests of what the full reconciliation judged, so the next one re-judges only what changed.

A full pass stores, per server and per node, a digest of every input its rules and its binding
read (`JudgedServer`, `JudgedNode`, and the globals on `ReconcileState`). The next pass asks
the database which rows differ from their digests (`changes`), and judges those instead of the
whole fleet (`clusters.reconcile`). The digests are computed in SQL: the inputs as one text
(a JSON array on SQLite, which has no hash function and keeps it; a 64-bit hash of them on
PostgreSQL), so the rows that did not change never reach Python.

What the digests cover:

- a server's identity, what binding reads (`IDENTITY_COLUMNS`, the scheduler nodes its agent
  declares among them): one that changed, came or went may move any node, and the pass judges
  everything;
- a server's facts: the rest of the Server columns `ServerFacts` takes (its rack and position
  among them), its age as the rules see it (fresh, live, else the time it last reported), its
  GPUs (status, name, MIG modes, health fields), its MIG devices, the GPUs it claims with
  their holder's row, and its VMs;
- a node: the Node columns `NodeFacts` takes, and the binding the pass left;
- the globals: clusters, hardware profiles, and the code that judges: a change judges
  everything.

A digest is read before the rows it stands for, so a change landing during a pass makes the
next pass judge that row again, never skip it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import (
    Aggregate,
    BigIntegerField,
    Case,
    Exists,
    F,
    Func,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce

from findings.services import BATCH
from inventory.health import HEALTH_FIELDS
from inventory.models import Gpu, GpuClaim, HardwareProfile, Server

from .fact_columns import IDENTITY_COLUMNS, NODE_COLUMNS, SERVER_COLUMNS
from .models import JudgedNode, JudgedServer, Node
from .rules.cluster import driver_skew
from .rules.location import location_inputs
from .rules.types import Fleet, ServerFacts

GPU_COLUMNS = ("uuid", "name", "mig_mode_current", "mig_mode_pending", *HEALTH_FIELDS)
"""The Gpu columns the server facts are counted from (`HEALTH_FIELDS` holds the status); the
profiles of its MIG devices come beside them."""

NODE_BINDING = ("id", "server_id", "binding_method")
"""The Node columns a node's digest leaves out: its id, and the binding it is stored beside."""


@dataclass
class Changes:
    """The servers and nodes whose inputs differ from what the last full pass judged.

    `servers` and `nodes` give the digests now (identity and facts; facts) of the live rows
    that are new or changed; `identities` is true when a server's identity changed, or a
    server came or went; `left` is the server each changed or vanished node was judged bound
    to (0: none); `vanished` are judged nodes now gone or deleted.
    """

    servers: dict[int, tuple[str, str]] = field(default_factory=dict)
    identities: bool = False
    nodes: dict[int, str] = field(default_factory=dict)
    left: dict[int, int] = field(default_factory=dict)
    vanished: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.servers or self.identities or self.nodes or self.vanished)


def changes(*, stale_before: datetime, offline_before: datetime) -> Changes:
    """What changed since the last full pass: four queries, whatever the fleet (and on
    PostgreSQL a `SET LOCAL` before them). Call it in a transaction: on PostgreSQL it turns
    JIT compilation off for the rest of it."""
    found = Changes()
    if connection.vendor == "postgresql":
        # The per-server subqueries make the planner's cost estimate large enough to JIT-
        # compile the server query with inlining: 1.8 s of compiling for 0.3 s of work.
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL jit = off")
    identity = _digest(_Row(*IDENTITY_COLUMNS))
    facts = _digest(_server_facts(stale_before, offline_before))
    servers = (
        Server.objects.order_by()
        .annotate(identity_now=identity, facts_now=facts)
        .filter(
            Q(judged__isnull=True)
            | ~Q(judged__identity=F("identity_now"))
            | ~Q(judged__facts=F("facts_now"))
        )
        .values_list("id", "identity_now", "facts_now", "judged__identity")
    )
    for server_id, identity_now, facts_now, identity_then in servers:
        found.servers[server_id] = (identity_now, facts_now)
        found.identities |= identity_now != identity_then
    found.identities |= _judged_servers_gone().exists()

    live = Node.objects.filter(gone_at__isnull=True).order_by()
    nodes = (
        live.annotate(
            facts_now=_digest(_node_facts()),
            bound_now=Coalesce("server_id", Value(0), output_field=BigIntegerField()),
        )
        .filter(
            Q(judged__isnull=True)
            | ~Q(judged__facts=F("facts_now"))
            | ~Q(judged__bound_to=F("bound_now"))
            | ~Q(judged__binding_method=F("binding_method"))
        )
        .values_list("id", "facts_now", "judged__bound_to")
    )
    for node_id, facts_now, bound_to in nodes:
        found.nodes[node_id] = facts_now
        found.left[node_id] = bound_to or 0
    vanished = JudgedNode.objects.filter(~Exists(live.filter(id=OuterRef("node_id"))))
    for node_id, bound_to in vanished.values_list("node_id", "bound_to"):
        found.vanished.append(node_id)
        found.left[node_id] = bound_to
    return found


def judged_save(
    *,
    servers: dict[int, tuple[str, str]],
    versions: Mapping[int, str],
    nodes: dict[int, tuple[str, int | None, str]],
    vanished: list[int],
    identities: bool,
) -> None:
    """Store what a pass judged: servers by id (identity, facts) with their `versions_of`,
    nodes by id (facts, the server bound to, how); forget the vanished nodes, and the servers
    deleted since when `identities` changed (a deleted server is a changed identity)."""
    JudgedServer.objects.bulk_create(
        [
            JudgedServer(server_id=i, identity=d[0], facts=d[1], versions=versions.get(i, ""))
            for i, d in servers.items()
        ],
        update_conflicts=True,
        unique_fields=["server"],
        update_fields=["identity", "facts", "versions"],
        batch_size=BATCH,
    )
    JudgedNode.objects.bulk_create(
        [
            JudgedNode(node_id=i, facts=f, bound_to=s or 0, binding_method=m)
            for i, (f, s, m) in nodes.items()
        ],
        update_conflicts=True,
        unique_fields=["node"],
        update_fields=["facts", "bound_to", "binding_method"],
        batch_size=BATCH,
    )
    for start in range(0, len(vanished), BATCH):
        JudgedNode.objects.filter(node_id__in=vanished[start : start + BATCH]).delete()
    if identities:
        _judged_servers_gone().delete()


def versions_of(fleet: Fleet, server: ServerFacts) -> str:
    """What the fleet rules that a pass of changes judges again read of a server, by rule:
    `driver_skew` (its versions, whether it has GPUs) and `LOCATION_RULES` (its addresses, age
    and rack place). Such a pass judges one again only when its part changed for a server it
    judges (`rules_to_judge_again`)."""
    return json.dumps(
        {
            driver_skew.__name__: [server.driver_version, server.cuda_version, bool(server.gpus)],
            **location_inputs(fleet, server),
        }
    )


def judged_versions(server_ids: Collection[int]) -> dict[int, str]:
    """The stored `versions_of` these servers."""
    rows = JudgedServer.objects.filter(server_id__in=list(server_ids))
    return dict(rows.values_list("server_id", "versions"))


def rules_to_judge_again(now: Mapping[int, str], then: Mapping[int, str]) -> set[str]:
    """The rules (by name) whose part of `versions_of` differs, for a server of `now`, from
    what was judged (`then`, from `judged_versions`): all of them for a server judged under
    another shape of it (an older version of the code) or never."""
    found: set[str] = set()
    for server_id, text in now.items():
        judged = _loads(then.get(server_id))
        for rule, inputs in json.loads(text).items():
            if not isinstance(judged, dict) or judged.get(rule) != inputs:
                found.add(rule)
    return found


def _loads(text: str | None) -> Any:
    try:
        return json.loads(text or "")
    except json.JSONDecodeError:
        return None


def judged_facts(node_ids: list[int]) -> dict[int, str]:
    """The stored digests of these nodes (for nodes that moved but did not change)."""
    found: dict[int, str] = {}
    for start in range(0, len(node_ids), BATCH):
        rows = JudgedNode.objects.filter(node_id__in=node_ids[start : start + BATCH])
        found.update(rows.values_list("node_id", "facts"))
    return found


def globals_now(clusters: dict[int, str]) -> str:
    """What every finding may read beyond its own server and nodes: cluster names (id ->
    name, as the pass read them), hardware profiles (in the order they are matched), and the
    code that judges."""
    profiles = list(
        HardwareProfile.objects.values_list(
            "id", "name", "vendor", "product", "expected_gpu_count", "expected_gpu_model"
        )
    )
    return json.dumps([code_version(), sorted(clusters.items()), profiles])


@cache
def code_version() -> str:
    """A digest of the source of the apps whose code judges (the rules, binding, the facts,
    the health rule, MIG names): a deploy that changes them judges everything once."""
    digest = hashlib.sha256()
    for app in ("agent", "clusters", "core", "inventory"):
        for path in sorted((Path(settings.BASE_DIR) / app).rglob("*.py")):
            if "migrations" not in path.parts:
                digest.update(path.read_bytes())
    return digest.hexdigest()


# The digests, in SQL --------------------------------------------------------------------


class _Row(Func):
    """Values as one row: a JSON array on SQLite (its text is the digest there), a record on
    PostgreSQL (hashed field by field by `HASH_RECORD_EXTENDED`, PostgreSQL 14 and later:
    four times as fast as building JSON and hashing its text)."""

    function = "JSON_ARRAY"
    output_field = TextField()

    def as_postgresql(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="ROW(%(expressions)s)", **extra_context)


class _Rows(Aggregate):
    """`_Row`s as one value: SQLite's JSON_GROUP_ARRAY; on PostgreSQL the sum of their hashes,
    which leaves out their order."""

    function = "JSON_GROUP_ARRAY"
    output_field = TextField()

    def as_postgresql(self, compiler, connection, **extra_context):
        return self.as_sql(
            compiler,
            connection,
            template="SUM(HASH_RECORD_EXTENDED(%(expressions)s, 0))",
            **extra_context,
        )


def _rows_of(queryset: QuerySet, key: str, columns: tuple[str, ...]) -> Subquery:
    """The rows of `queryset` whose `key` is the outer server's id, as one JSON array (NULL
    for none)."""
    rows = (
        queryset.filter(**{key: OuterRef("id")})
        .order_by()
        .values(key)
        .annotate(rows=_Rows(_Row(*columns)))
        .values("rows")
    )
    return Subquery(rows, output_field=TextField())


def _server_facts(stale_before: datetime, offline_before: datetime) -> _Row:
    own = [c for c in SERVER_COLUMNS if c not in ("id", "last_seen", *IDENTITY_COLUMNS)]
    age = (
        Case(
            When(last_seen__gte=stale_before, then=Value("fresh")),
            default=Cast("last_seen", TextField()),
            output_field=TextField(),
        ),
        Case(
            When(last_seen__gte=offline_before, then=Value("live")),
            default=Value("offline"),
            output_field=TextField(),
        ),
    )
    claims = ("uuid", "mig_device_id", "gpu_id", "gpu__server_id", "gpu__status", "gpu__serial")
    return _Row(
        *own,
        *age,
        # Each GPU with its MIG devices' profiles (one row per device): one subquery for both,
        # as a second one would read the server's GPUs again.
        _rows_of(Gpu.objects.all(), "server_id", (*GPU_COLUMNS, "mig_devices__profile")),
        _rows_of(GpuClaim.objects.all(), "server_id", claims),
        _rows_of(Server.objects.all(), "physical_host_id", ("id",)),
    )


def _node_facts() -> _Row:
    return _Row(*(c for c in NODE_COLUMNS if c not in NODE_BINDING))


class _Hash(Func):
    """A row's 64-bit hash on PostgreSQL: stable across versions (hash partitioning stores rows
    by it)."""

    function = "HASH_RECORD_EXTENDED"
    template = "%(function)s(%(expressions)s, 0)::text"
    output_field = TextField()


def _digest(row: _Row) -> Any:
    return _Hash(row) if connection.vendor == "postgresql" else row


def _judged_servers_gone() -> QuerySet:
    # NOT EXISTS, not NOT IN: PostgreSQL turns it into an anti-join; NOT IN over 25,000 ids
    # outgrows work_mem and is scanned once per row.
    return JudgedServer.objects.filter(~Exists(Server.objects.filter(id=OuterRef("server_id"))))
