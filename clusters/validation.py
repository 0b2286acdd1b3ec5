"""Snapshot validation: every parsed node must fit the columns that store it.

The parsers read whatever a tool printed; a crafted or corrupt snapshot can still carry a
2^31 CPU count, a 10^20-byte memory, a GRES count beyond any column or a 300-character name.
Such a node is refused with a 400 naming the node and the field, and the cluster keeps its
node set; nothing is truncated where truncation would change what a value means (names,
identities, counts). Free text (reason, raw state, versions) is cut to its column instead.

Bounds come from the Node model itself, so validation and columns never drift apart.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.backends.base.operations import BaseDatabaseOperations

from .models import Node
from .parsers import NodeRecord, PodRecord

MAX_ERRORS = 50
MAX_LIST_ITEMS = 256  # addresses, taints, partitions, state flags, GRES entries per node
MAX_MAP_ITEMS = 512  # extended resources, MIG resources per node
MAX_LABELS = 4096  # Kubernetes bounds a Node object (1.5 MB), not its label count
MAX_KEY_CHARS = 317  # a Kubernetes label key: a 253-character prefix, '/', a 63-character name
MAX_VALUE_CHARS = 1024  # Kubernetes itself allows 63 for a label value
MAX_ITEM_CHARS = 512  # one address, partition, flag, taint field, GRES name or type
INT_RANGES = BaseDatabaseOperations.integer_field_ranges
BIGINT_MAX = INT_RANGES["BigIntegerField"][1]
GRES_COUNT_MAX = BIGINT_MAX  # Slurm keeps GRES counts as uint64_t; NO_VAL64 is its top

# NodeRecord attribute -> Node column, where the names are the same and the value is stored
# as it is (lower-casing aside). Text columns cut to length are not here.
STRING_COLUMNS = (
    "name",
    "hostname",
    "system_uuid",
    "machine_id",
    "state",
    "gpu_product",
    "sharing_strategy",
    "mig_strategy",
    "mig_config",
)
INTEGER_COLUMNS = (
    "cpus",
    "cpus_effective",
    "memory_bytes",
    "gpu_capacity",
    "gpu_allocatable",
    "gpu_used",
)
INTEGER_COLUMNS_ALSO = ("gpu_replicas",)
LIST_FIELDS = ("addresses", "state_flags", "partitions")


def _column_range(name: str) -> tuple[int, int]:
    low, high = INT_RANGES[Node._meta.get_field(name).get_internal_type()]
    return max(low, 0), high


def node_record_limit(field: str) -> int:
    """The largest count a Node integer column holds (what pods may add up to, too)."""
    return _column_range(field)[1]


def _label(record: NodeRecord) -> str:
    name = record.name if isinstance(record.name, str) else repr(record.name)
    return name if len(name) <= 60 else f"{name[:57]}..."


def node_record_errors(records: list[NodeRecord]) -> dict[str, list[str]]:
    """Path (`nodes.<index>.<field>`) -> messages naming the node; empty when all fit."""
    errors: dict[str, list[str]] = {}
    seen: dict[str, int] = {}

    def add(index: int, record: NodeRecord, field: str, message: str) -> None:
        if sum(len(v) for v in errors.values()) < MAX_ERRORS:
            errors.setdefault(f"nodes.{index}.{field}", []).append(
                f"node {_label(record)!r}: {message}"
            )

    for index, record in enumerate(records):
        for field, message in _record_problems(record):
            add(index, record, field, message)
        if isinstance(record.name, str) and record.name:
            if record.name in seen:
                add(index, record, "name", f"appears twice (first as node {seen[record.name]})")
            seen.setdefault(record.name, index)
    return errors


def pod_record_errors(pods: list[PodRecord]) -> dict[str, list[str]]:
    """Path -> messages for a pod list the nodes cannot take: a pod listed twice (by
    namespace and name: `items[<index>].metadata.name`), or the GPUs pods request on one node
    beyond its `gpu_used` column (`pods`). Empty when the list fits."""
    errors: dict[str, list[str]] = {}
    seen: dict[tuple[str, str], int] = {}
    for index, pod in enumerate(pods):
        key = (pod.namespace, pod.name)
        if key in seen and len(errors) < MAX_ERRORS:
            errors[f"items[{index}].metadata.name"] = [
                f"pod {'/'.join(key)[:120]!r} is listed twice (first as items[{seen[key]}])"
            ]
        seen.setdefault(key, index)
    used: dict[str, int] = {}
    for pod in pods:
        if pod.holds_resources and pod.node_name:
            used[pod.node_name] = used.get(pod.node_name, 0) + pod.gpu_requests
    most = node_record_limit("gpu_used")
    for node_name, count in used.items():
        if not 0 <= count <= most:
            errors.setdefault("pods", []).append(
                f"pods on node {node_name[:60]!r} request {count} GPUs; at most {most}"
            )
            break
    return errors


def _record_problems(record: NodeRecord):
    if not isinstance(record.name, str) or not record.name.strip():
        yield "name", "a node needs a name"
    for field in STRING_COLUMNS:
        value = getattr(record, field)
        if value is None:
            continue
        if not isinstance(value, str):
            yield field, f"expected text, got {type(value).__name__}"
            continue
        column = Node._meta.get_field(field)
        limit = column.max_length if isinstance(column, models.CharField) else None
        if limit is not None and len(value) > limit:
            yield field, f"{len(value)} characters; at most {limit}"
    for field in (*INTEGER_COLUMNS, *INTEGER_COLUMNS_ALSO):
        yield from _integer_problems(field, getattr(record, field), _column_range(field))
    for field in LIST_FIELDS:
        yield from _list_problems(field, getattr(record, field))
    yield from _taint_problems(record.taints)
    yield from _gres_problems(record.gres)
    yield from _map_problems("labels", record.labels, str, MAX_LABELS)
    yield from _map_problems("mig_resources", record.mig_resources, int, MAX_MAP_ITEMS)
    if record.mig_used is not None:
        yield from _map_problems("mig_used", record.mig_used, int, MAX_MAP_ITEMS)
    yield from _resource_problems(record.resources)


def _integer_problems(field: str, value: Any, bounds: tuple[int, int]):
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        yield field, f"expected a whole number, got {type(value).__name__}"
    elif not bounds[0] <= value <= bounds[1]:
        yield field, f"{_short_number(value)} is outside {bounds[0]}..{bounds[1]}"


def _short_number(value: int) -> str:
    text = str(value) if abs(value) < 10**30 else f"a {len(str(abs(value)))}-digit number"
    return text


def _list_problems(field: str, values: Any):
    if not isinstance(values, list):
        yield field, "expected a list"
        return
    if len(values) > MAX_LIST_ITEMS:
        yield field, f"{len(values)} items; at most {MAX_LIST_ITEMS}"
    for i, value in enumerate(values[:MAX_LIST_ITEMS]):
        if not isinstance(value, str) or len(value) > MAX_ITEM_CHARS:
            yield f"{field}.{i}", f"expected text of at most {MAX_ITEM_CHARS} characters"
            return


def _taint_problems(taints: Any):
    if not isinstance(taints, list) or len(taints) > MAX_LIST_ITEMS:
        yield "taints", f"expected a list of at most {MAX_LIST_ITEMS} taints"
        return
    for i, taint in enumerate(taints):
        if not isinstance(taint, dict) or any(
            not isinstance(v, str | None) or (isinstance(v, str) and len(v) > MAX_VALUE_CHARS)
            for v in taint.values()
        ):
            yield f"taints.{i}", f"a taint field is text of at most {MAX_VALUE_CHARS} characters"
            return


def _gres_problems(gres: Any):
    if not isinstance(gres, list) or len(gres) > MAX_LIST_ITEMS:
        yield "gres", f"expected a list of at most {MAX_LIST_ITEMS} GRES entries"
        return
    # GRES counts are 64-bit in Slurm (memory-like GRES such as vmem:2G, shards, MPS
    # shares); they are stored in the node's JSON column, which holds any of them. The GPU
    # figures they add up to are checked against their own columns.
    for i, entry in enumerate(gres):
        for key in ("count", "used"):
            value = entry.get(key) if isinstance(entry, dict) else None
            yield from _integer_problems(f"gres.{i}.{key}", value, (0, GRES_COUNT_MAX))
        for key in ("name", "type", "used_indexes", "mig_profile"):
            value = entry.get(key) if isinstance(entry, dict) else None
            if value is not None and (not isinstance(value, str) or len(value) > MAX_ITEM_CHARS):
                yield f"gres.{i}.{key}", f"expected text of at most {MAX_ITEM_CHARS} characters"


def _map_problems(field: str, values: Any, kind: type, most: int):
    if not isinstance(values, dict):
        yield field, "expected a map"
        return
    if len(values) > most:
        yield field, f"{len(values)} entries; at most {most}"
        return
    for key, value in values.items():
        if not isinstance(key, str) or len(key) > MAX_KEY_CHARS:
            yield field, f"a key longer than {MAX_KEY_CHARS} characters"
            return
        if kind is str:
            if not isinstance(value, str) or len(value) > MAX_VALUE_CHARS:
                yield f"{field}.{key}", f"expected text of at most {MAX_VALUE_CHARS} characters"
        else:
            yield from _integer_problems(f"{field}.{key}", value, (0, BIGINT_MAX))


def _resource_problems(resources: Any):
    if not isinstance(resources, dict) or len(resources) > MAX_MAP_ITEMS:
        yield "resources", f"expected a map of at most {MAX_MAP_ITEMS} resources"
        return
    for name, amounts in resources.items():
        if not isinstance(name, str) or len(name) > MAX_KEY_CHARS or not isinstance(amounts, dict):
            yield "resources", f"a resource is a name of at most {MAX_KEY_CHARS} characters"
            return
        for key, value in amounts.items():
            yield from _integer_problems(f"resources.{name}.{key}", value, (0, BIGINT_MAX))
