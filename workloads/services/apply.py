"""Apply a parsed workload listing to the database: Workload and Allocation rows.

One pass per listing, a fixed number of queries however many jobs it holds: the
cluster's workloads are read once (id, scheduler id, digest), unchanged records (same
digest) cost nothing, new and changed ones are bulk-written, and their allocations are
diffed against the open ones (an allocation the listing no longer names is closed with
`until`, a new one created with `since`). A complete listing ends the running workloads it
does not name. Nodes, servers, GPUs and MIG devices are joined by name, index and UUID in
three reads. A jobs listing never changes the node set.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import operator
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from agent.mig import normalize_mig_profile
from clusters.models import Cluster, Node
from core.batches import chunks
from inventory.choices import GpuStatus
from inventory.models import Gpu, MigDevice
from workloads.choices import WorkloadKind, WorkloadState
from workloads.models import Allocation, Workload
from workloads.records import (
    TERMINAL,
    GpuSlot,
    JobsSnapshot,
    WorkloadFormatError,
    WorkloadRecord,
)

BATCH = 2000
GONE_STATE = "gone from the listing"

# The Workload fields a record sets (all but the joins and the placement verdict).
RECORD_FIELDS = (
    "name",
    "user",
    "account",
    "partition",
    "state",
    "raw_state",
    "submitted_at",
    "started_at",
    "ended_at",
    "node_count",
    "gpu_count",
    "gpus_per_node",
    "requested",
    "owner_kind",
    "sharing",
    "source",
    "digest",
    "last_seen",
)


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What a listing did: workloads it named, created, changed (new digest), ended
    (terminal in the listing, or gone from a complete one), and allocations opened/closed."""

    cluster: str
    format: str
    workloads: int
    created: int
    changed: int
    unchanged: int
    ended: int
    allocations_opened: int
    allocations_closed: int

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


_SCALARS = frozenset({str, int, float, bool, type(None), datetime})
_FIELDS: dict[type, tuple[str, ...]] = {}


def _plain(value: Any) -> Any:
    """`dataclasses.asdict` without its deep copies: the same dicts and lists, so the same
    JSON. `_canonical` writes the rest itself: only its fallback (dicts such as `requested`,
    floats, enum members) comes here."""
    cls = type(value)
    if cls in _SCALARS:
        return value
    names = _FIELDS.get(cls)
    if names is None and hasattr(cls, "__dataclass_fields__"):
        names = _FIELDS[cls] = tuple(cls.__dataclass_fields__)
    if names is not None:
        return {name: _plain(getattr(value, name)) for name in names}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


_encode_str = json.encoder.encode_basestring_ascii  # what json.dumps writes a str as
_SLOT_JSON: dict[Any, str] = {}  # a GpuSlot's JSON: few distinct slots in a whole fleet


def _canonical(value: Any) -> str:
    """`json.dumps(dataclasses.asdict(value), sort_keys=True, default=str,
    separators=(",", ":"))`, written directly: a dataclass's fields in sorted order, scalars
    as `json` writes them, and each distinct GPU slot encoded once per process (a listing's
    50,000 jobs name a few dozen). The same bytes, so stored digests hold (a test holds it
    against `asdict`)."""
    cls = type(value)
    if cls is str:
        return _encode_str(value)
    if value is None:
        return "null"
    if cls is bool:
        return "true" if value else "false"
    if cls is int:
        return int.__repr__(value)
    if cls is datetime:
        return _encode_str(str(value))
    if cls is GpuSlot:
        text = _SLOT_JSON.get(value)
        if text is None:
            if len(_SLOT_JSON) > 100_000:
                _SLOT_JSON.clear()
            text = _SLOT_JSON[value] = _dataclass_json(value)
        return text
    if hasattr(cls, "__dataclass_fields__"):
        return _dataclass_json(value)
    if cls is tuple or cls is list:
        return "[" + ",".join(map(_canonical, value)) + "]"
    return json.dumps(_plain(value), sort_keys=True, default=str, separators=(",", ":"))


_SORTED: dict[type, tuple[tuple[str, ...], Any]] = {}


def _dataclass_json(value: Any) -> str:
    cls = type(value)
    spec = _SORTED.get(cls)
    if spec is None:
        names = tuple(sorted(cls.__dataclass_fields__))
        keys = tuple(_encode_str(name) + ":" for name in names)
        getter = operator.attrgetter(*names) if len(names) > 1 else None
        spec = _SORTED[cls] = (keys, getter if getter else operator.attrgetter(names[0]))
    keys, getter = spec
    values = getter(value)
    if len(keys) == 1:
        values = (values,)
    return "{" + ",".join([key + _canonical(v) for key, v in zip(keys, values, strict=True)]) + "}"


def record_digest(record: WorkloadRecord) -> str:
    """The digest of a record's facts: equal records, equal digest (the unchanged job of a
    listing applied every 30 s costs one comparison)."""
    return hashlib.sha256(_canonical(record).encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class _NodeFacts:
    id: int
    server_id: int | None
    gpu_capacity: int


@dataclass(frozen=True, slots=True)
class _GpuFacts:
    id: int
    server_id: int
    index: int
    uuid: str
    serial: str
    name: str
    status: str


def by_slot_of(gpus: Iterable[_GpuFacts]) -> dict[tuple[int, int], _GpuFacts]:
    """The GPU at each (server, index): a scheduler's index names a GPU that is there, so a
    lost GPU (fallen off the bus: NVML renumbered the rest) never takes its old index."""
    slots: dict[tuple[int, int], _GpuFacts] = {}
    for gpu in sorted(gpus, key=lambda g: g.status != GpuStatus.LOST):
        slots[(gpu.server_id, gpu.index)] = gpu
    return slots


@dataclass(frozen=True, slots=True)
class _Joins:
    nodes: dict[str, _NodeFacts]
    gpu_by_slot: dict[tuple[int, int], _GpuFacts]
    gpu_by_uuid: dict[str, _GpuFacts]
    mig_by_uuid: dict[str, tuple[int, int]]  # MIG uuid -> (mig id, gpu id)
    gpu_by_id: dict[int, _GpuFacts]


def _chunks(values: list[Any], size: int = BATCH) -> Iterable[Sequence[Any]]:
    return chunks(values, size)


def _gpus_on(server_ids: list[int]) -> list[_GpuFacts]:
    """The GPUs of these servers, as the joins need them (one query per batch)."""
    return [
        _GpuFacts(**row)
        for chunk in _chunks(server_ids)
        for row in Gpu.objects.filter(server_id__in=chunk).values(
            "id", "server_id", "index", "uuid", "serial", "name", "status"
        )
    ]


def _node_facts(cluster: Cluster, records: Iterable[WorkloadRecord]) -> dict[str, _NodeFacts]:
    """The nodes the records name, in one read (every record: validation needs them)."""
    names = {a.node for r in records for a in r.allocations}
    nodes: dict[str, _NodeFacts] = {}
    for chunk in _chunks(sorted(names)):
        for row in Node.objects.filter(cluster=cluster, name__in=chunk).values(
            "id", "name", "server_id", "gpu_capacity"
        ):
            nodes[row["name"]] = _NodeFacts(row["id"], row["server_id"], row["gpu_capacity"])
    return nodes


def _joins(all_nodes: dict[str, _NodeFacts], records: Iterable[WorkloadRecord]) -> _Joins:
    """The GPUs and MIG devices of the nodes the records name, in two reads: only the
    new and changed records' (an unchanged job of a 50,000-job listing costs no GPU row)."""
    records = list(records)
    names = {a.node for r in records for a in r.allocations}
    uuids = {s.uuid for r in records for a in r.allocations for s in a.gpus if s.uuid}
    nodes = {name: all_nodes[name] for name in names if name in all_nodes}
    server_ids = sorted({n.server_id for n in nodes.values() if n.server_id is not None})
    gpus = _gpus_on(server_ids)
    mig_by_uuid: dict[str, tuple[int, int]] = {}
    mig_uuids = sorted(u for u in uuids if u.startswith("MIG-"))
    for chunk in _chunks(mig_uuids):
        for mig_id, uuid, gpu_id in MigDevice.objects.filter(uuid__in=chunk).values_list(
            "id", "uuid", "gpu_id"
        ):
            mig_by_uuid[uuid] = (mig_id, gpu_id)
    by_id = {g.id: g for g in gpus}
    # A MIG device's GPU may sit on a server none of the nodes names (a stale binding).
    missing = sorted({gpu_id for _, gpu_id in mig_by_uuid.values()} - set(by_id))
    for chunk in _chunks(missing):
        for gpu_row in Gpu.objects.filter(id__in=chunk).values(
            "id", "server_id", "index", "uuid", "serial", "name", "status"
        ):
            by_id[gpu_row["id"]] = _GpuFacts(**gpu_row)
    return _Joins(
        nodes=nodes,
        gpu_by_slot=by_slot_of(gpus),
        gpu_by_uuid={g.uuid: g for g in gpus},
        mig_by_uuid=mig_by_uuid,
        gpu_by_id=by_id,
    )


def _is_mig_slot(slot: GpuSlot) -> bool:
    return bool(slot.mig_profile) or bool(slot.gpu_type and normalize_mig_profile(slot.gpu_type))


# GPUs one workload holds on one node, time-slicing replicas included (8 GPUs x 48 replicas
# is 384): beyond this no scheduler printed it.
MAX_GPUS_PER_ALLOCATION = 4096


def validate_allocations(snapshot: JobsSnapshot, nodes: dict[str, _NodeFacts]) -> None:
    """Refuse a listing that names a GPU index its node does not have, or more GPUs on one
    node than any node holds (each is a row: 2**31 of them would exhaust the worker), a
    field-level 400: the whole listing is refused, nothing changes."""
    for position, record in enumerate(snapshot.workloads):
        for a_position, allocation in enumerate(record.allocations):
            if not 0 <= allocation.gpu_count <= MAX_GPUS_PER_ALLOCATION:
                raise WorkloadFormatError(
                    f"workload {record.scheduler_id[:60]!r} holds {allocation.gpu_count} GPUs "
                    f"on node {allocation.node[:60]!r}; at most {MAX_GPUS_PER_ALLOCATION}",
                    f"workloads[{position}].allocations[{a_position}].gpu_count",
                )
            node = nodes.get(allocation.node)
            if node is None or not node.gpu_capacity:
                continue
            for slot in allocation.gpus:
                if slot.index is None or _is_mig_slot(slot):
                    continue
                if slot.index >= node.gpu_capacity:
                    raise WorkloadFormatError(
                        f"workload {record.scheduler_id[:60]!r} holds GPU index {slot.index} "
                        f"on node {allocation.node[:60]!r}, which has {node.gpu_capacity} GPUs",
                        f"workloads[{position}].allocations[{a_position}].gpus",
                    )


def _desired_allocations(
    record: WorkloadRecord, joins: _Joins, since: datetime
) -> list[Allocation]:
    """The allocations a record says it holds now, joined; none once it has ended."""
    if record.history_only or record.state in TERMINAL or record.state == "pending":
        return []
    rows: list[Allocation] = []
    for allocation in record.allocations:
        node = joins.nodes.get(allocation.node)
        server_id = node.server_id if node else None
        pods = ",".join(allocation.pods)[:253]
        slots = list(allocation.gpus)
        # Counts the source could not name one by one are kept as anonymous slots.
        slots += [GpuSlot() for _ in range(max(allocation.gpu_count - len(slots), 0))]
        for slot in slots:
            gpu: _GpuFacts | None = None
            mig_id: int | None = None
            uuid = (slot.uuid or "").split("::")[0]  # time-slicing replicas: GPU-…::N
            if uuid and uuid in joins.mig_by_uuid:
                mig_id, gpu_id = joins.mig_by_uuid[uuid]
                gpu = joins.gpu_by_id.get(gpu_id)
            elif uuid:
                gpu = joins.gpu_by_uuid.get(uuid)
            elif slot.index is not None and server_id is not None and not _is_mig_slot(slot):
                gpu = joins.gpu_by_slot.get((server_id, slot.index))
            rows.append(
                Allocation(
                    node_name=allocation.node[:253],
                    node_id=node.id if node else None,
                    server_id=gpu.server_id if gpu else server_id,
                    gpu_id=gpu.id if gpu else None,
                    mig_device_id=mig_id,
                    index=slot.index,
                    uuid=(slot.uuid or "")[:128],
                    gpu_type=(slot.mig_profile or slot.gpu_type or "")[:128],
                    gpu_serial=gpu.serial if gpu else "",
                    pod=(slot.pod or pods)[:253],
                    shared=slot.shared or bool(slot.uuid and "::" in slot.uuid),
                    since=since,
                )
            )
    return rows


_KEY_FIELDS = ("node_name", "index", "uuid", "gpu_type", "gpu_id", "mig_device_id")


_key = operator.attrgetter(*_KEY_FIELDS)
"""What makes two allocations of one workload the same: the `_KEY_FIELDS`, as a tuple."""


def _gpu_models(rows: Sequence[Any], gpu_names: dict[int, str]) -> list[str]:
    names = {gpu_names[r.gpu_id] for r in rows if r.gpu_id in gpu_names}
    names |= {r.gpu_type for r in rows if r.gpu_id is None and r.gpu_type}
    return sorted(n for n in names if n)


def _kinds(snapshot: JobsSnapshot) -> list[str]:
    return [WorkloadKind.SLURM_JOB] if snapshot.scheduler == "slurm" else [WorkloadKind.PODS]


@transaction.atomic
def workloads_apply(
    *, cluster: Cluster, snapshot: JobsSnapshot, now: datetime | None = None
) -> ApplyResult:
    """Apply one listing to `cluster`. Raises WorkloadFormatError (nothing written) for a
    listing that names GPUs its nodes do not have; idempotent: the same listing twice
    changes nothing the second time."""
    now = now or timezone.now()
    records = {r.scheduler_id: r for r in snapshot.workloads}
    nodes = _node_facts(cluster, records.values())
    validate_allocations(snapshot, nodes)

    existing = {
        (row["kind"], row["scheduler_id"]): row
        for row in Workload.objects.filter(cluster=cluster).values(
            "id", "kind", "scheduler_id", "digest", "state", "ended_at"
        )
    }
    created: list[Workload] = []
    changed: list[Workload] = []
    changed_records: dict[int, WorkloadRecord] = {}
    new_records: list[WorkloadRecord] = []
    unchanged = 0
    for record in records.values():
        digest = record_digest(record)
        row = existing.get((record.kind, record.scheduler_id))
        if row is not None and row["digest"] == digest:
            unchanged += 1
            continue
        live = row is not None and row["state"] not in TERMINAL
        if snapshot.history and (live or row is None) and record.state not in TERMINAL:
            unchanged += 1  # accounting says "running": the live view knows better
            continue
        workload = _workload(cluster, record, digest, now, snapshot.format[:64])
        if row is None:
            workload.first_seen = now
            created.append(workload)
            new_records.append(record)
        else:
            workload.pk = row["id"]
            changed.append(workload)
            changed_records[row["id"]] = record
    Workload.objects.bulk_create(created, batch_size=BATCH)
    if any(w.pk is None for w in created):  # backends without RETURNING ids on bulk insert
        ids = dict(
            Workload.objects.filter(
                cluster=cluster, scheduler_id__in=[w.scheduler_id for w in created]
            ).values_list("scheduler_id", "id")
        )
        for workload in created:
            workload.pk = ids[workload.scheduler_id]
    for workload, record in zip(created, new_records, strict=True):
        changed_records[workload.pk] = record
    # An upsert on the primary key, not bulk_update: its CASE WHEN per field and row cost
    # over a second for 500 changed jobs; every row exists, so each conflicts and updates.
    Workload.objects.bulk_create(
        changed,
        batch_size=BATCH,
        update_conflicts=True,
        unique_fields=["id"],
        update_fields=list(RECORD_FIELDS),
    )
    joins = _joins(nodes, changed_records.values())

    ended = sum(1 for r in changed_records.values() if r.state in TERMINAL)
    if snapshot.complete:
        gone = [
            row["id"]
            for key, row in existing.items()
            if key[0] in _kinds(snapshot)
            and key[1] not in records
            and row["state"] not in TERMINAL
            and row["ended_at"] is None
        ]
        for chunk in _chunks(gone):
            Workload.objects.filter(id__in=chunk).update(
                state=WorkloadState.UNKNOWN, raw_state=GONE_STATE, ended_at=now, digest=""
            )
        ended += len(gone)
    else:
        gone = []

    opened, closed = _allocations_apply(changed_records, gone, joins, now)
    _models_apply(changed_records, joins)
    allocations_join(cluster=cluster)  # those applied before their nodes were bound
    return ApplyResult(
        cluster=cluster.name,
        format=snapshot.format,
        workloads=len(records),
        created=len(created),
        changed=len(changed),
        unchanged=unchanged,
        ended=ended,
        allocations_opened=opened,
        allocations_closed=closed,
    )


def _workload(
    cluster: Cluster, record: WorkloadRecord, digest: str, now: datetime, snapshot_format: str
) -> Workload:
    ended_at = record.ended_at
    if ended_at is None and record.state in TERMINAL:
        ended_at = now
    return Workload(
        cluster=cluster,
        kind=record.kind,
        scheduler_id=record.scheduler_id[:300],
        name=record.name[:300],
        user=record.user[:128],
        account=record.account[:253],
        partition=record.partition[:200],
        state=record.state,
        raw_state=record.raw_state[:200],
        submitted_at=record.submitted_at,
        started_at=record.started_at,
        ended_at=ended_at,
        node_count=record.node_count or len(record.allocations),
        gpu_count=record.gpu_count
        or sum(max(a.gpu_count, len(a.gpus)) for a in record.allocations),
        gpus_per_node=record.gpus_per_node,
        requested=record.requested,
        owner_kind=record.owner_kind[:64],
        sharing=record.sharing[:32],
        source=snapshot_format,
        digest=digest,
        last_seen=now,
    )


def _allocations_apply(
    records: dict[int, WorkloadRecord], gone: list[int], joins: _Joins, now: datetime
) -> tuple[int, int]:
    """Diff each changed workload's open allocations against what its record holds now."""
    ids = sorted(records) + gone
    # The open allocations as tuples (their diff key and id), no model instances.
    open_rows: dict[int, list[tuple[tuple[Any, ...], int]]] = {}
    for chunk in _chunks(ids):
        for pk, workload_id, *key in Allocation.objects.filter(
            workload_id__in=chunk, until__isnull=True
        ).values_list("id", "workload_id", *_KEY_FIELDS):
            open_rows.setdefault(workload_id, []).append((tuple(key), pk))
    to_create: list[Allocation] = []
    to_close: list[int] = []
    # A job first seen ended (it ran between two listings) leaves its GPUs as history.
    ran = [w for w, r in records.items() if r.state in TERMINAL and r.allocations]
    recorded: set[int] = set()
    for chunk in _chunks(ran):
        recorded |= set(
            Allocation.objects.filter(workload_id__in=chunk).values_list("workload_id", flat=True)
        )
    for workload_id in ran:
        record = records[workload_id]
        if workload_id in recorded or record.started_at is None:
            continue
        until = record.ended_at or now
        running = dataclasses.replace(record, state="running")
        for row in _desired_allocations(running, joins, record.started_at):
            row.workload_id, row.until = workload_id, until
            to_create.append(row)
    for workload_id, record in records.items():
        since = record.started_at or now
        desired = _desired_allocations(record, joins, since)
        # A multiset diff: GPUs known only by count share one key, and 8 counted GPUs
        # replaced by the 8 the kubelet names close all 8.
        current: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        for key, pk in open_rows.get(workload_id, ()):
            current[key].append(pk)
        for row in desired:
            kept = current.get(_key(row))
            if kept:
                kept.pop()
                continue
            row.workload_id = workload_id
            to_create.append(row)
        to_close += [pk for pks in current.values() for pk in pks]
    to_close += [pk for workload_id in gone for _, pk in open_rows.get(workload_id, ())]
    for chunk in _chunks(to_close):
        Allocation.objects.filter(id__in=chunk).update(until=now)
    Allocation.objects.bulk_create(to_create, batch_size=BATCH)
    return len(to_create), len(to_close)


def _models_apply(records: Iterable[int], joins: _Joins) -> None:
    """Each changed workload's GPU models, from the GPUs it holds (else the GRES types)."""
    if not records:
        return
    # The allocations as named row tuples (what the GPU models need), no model instances.
    rows: dict[int, list[Any]] = {}
    for chunk in _chunks(sorted(records)):
        for row in Allocation.objects.filter(workload_id__in=chunk).values_list(
            "workload_id", "gpu_id", "gpu_type", "until", "server_id", named=True
        ):
            rows.setdefault(row.workload_id, []).append(row)
    gpu_names = {gpu_id: gpu.name for gpu_id, gpu in joins.gpu_by_id.items()}
    # An ended workload's past GPUs may lie on nodes no changed record names.
    missing = sorted(
        {r.gpu_id for held in rows.values() for r in held if r.gpu_id is not None} - set(gpu_names)
    )
    for chunk in _chunks(missing):
        gpu_names.update(Gpu.objects.filter(id__in=chunk).values_list("id", "name"))
    # Counted GPUs (pods without the kubelet's device IDs) and Slurm's MIG indices name no
    # GPU row: their models are their servers' (one read for all of them).
    unnamed = {
        r.server_id for held in rows.values() for r in held if r.gpu_id is None and r.server_id
    }
    by_server: dict[int, set[str]] = {}
    for chunk in _chunks(sorted(unnamed)):
        for server_id, name in (
            Gpu.objects.filter(server_id__in=chunk).values_list("server_id", "name").distinct()
        ):
            by_server.setdefault(server_id, set()).add(name)
    # Few distinct model lists: one UPDATE per list, not a CASE WHEN per workload.
    by_models: dict[tuple[str, ...], list[int]] = {}
    for workload_id in records:
        held = rows.get(workload_id, [])
        open_ = [r for r in held if r.until is None] or held
        models = set(_gpu_models([r for r in open_ if r.gpu_id is not None], gpu_names))
        for row in open_:
            if row.gpu_id is None:
                models |= by_server.get(row.server_id or 0) or {row.gpu_type} - {""}
        by_models.setdefault(tuple(sorted(models)), []).append(workload_id)
    for models_list, ids in by_models.items():
        for chunk in _chunks(ids):
            Workload.objects.filter(id__in=chunk).update(gpu_models=list(models_list))


def allocations_join(*, cluster: Cluster | None = None) -> int:
    """Join the open allocations that name a GPU (by index or UUID) but hold no GPU row
    yet, or whose node is now bound to another server: a listing may arrive before the
    reconcile binds its nodes, and a node may be rebound. A fixed number of queries; the
    changed workloads' GPU models follow. Returns the allocations (re)joined."""
    named = Q(index__isnull=False) | ~Q(uuid="")
    moved = Q(server__isnull=True) | ~Q(server_id=F("node__server_id"))
    stale = (named & Q(gpu__isnull=True)) | moved
    # Held now, or given back within the day (a job first seen ended still names its GPUs).
    recent = Q(until__isnull=True) | Q(until__gte=timezone.now() - timedelta(days=1))
    query = Allocation.objects.filter(stale, recent, node__isnull=False, node__server__isnull=False)
    if cluster is not None:
        query = query.filter(workload__cluster=cluster)
    rows = list(
        query.select_related("node").only(
            "id", "workload_id", "index", "uuid", "gpu_type", "node__server_id", "node__name"
        )[: BATCH * 10]
    )
    if not rows:
        return 0
    bound = {r.pk: r.node.server_id for r in rows if r.node is not None and r.node.server_id}
    server_ids = sorted(set(bound.values()))
    gpus = _gpus_on(server_ids)
    by_slot = by_slot_of(gpus)
    by_uuid = {g.uuid: g for g in gpus}
    migs = dict(
        (uuid, (mig_id, gpu_id))
        for mig_id, uuid, gpu_id in MigDevice.objects.filter(
            gpu__server_id__in=server_ids,
            uuid__in=[r.uuid.split("::")[0] for r in rows if r.uuid],
        ).values_list("id", "uuid", "gpu_id")
    )
    by_id = {g.id: g for g in gpus}
    for row in rows:
        server_id = bound[row.pk]
        uuid = row.uuid.split("::")[0]
        gpu: _GpuFacts | None = None
        row.mig_device_id = None
        if uuid in migs:
            row.mig_device_id, gpu_id = migs[uuid]
            gpu = by_id.get(gpu_id)
        elif uuid:
            gpu = by_uuid.get(uuid)
        elif row.index is not None and not _is_mig_slot(GpuSlot(gpu_type=row.gpu_type)):
            gpu = by_slot.get((server_id, row.index))
        row.gpu_id = gpu.id if gpu else None
        row.gpu_serial = gpu.serial if gpu else ""
        row.server_id = server_id
    Allocation.objects.bulk_update(
        rows, ["gpu_id", "mig_device_id", "gpu_serial", "server_id"], batch_size=BATCH
    )
    joins = _Joins(
        nodes={}, gpu_by_slot=by_slot, gpu_by_uuid=by_uuid, mig_by_uuid=migs, gpu_by_id=by_id
    )
    touched = {r.workload_id for r in rows}
    _models_apply(touched, joins)
    return len(rows)
