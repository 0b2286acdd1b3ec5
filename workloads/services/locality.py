"""The one writer of a workload's placement judgement (`Workload.locality`, `verdict`).

Placement (a reader above this layer) judges; the judgement is the workload's own record, so
it is written here, in bulk, and nothing else writes those two fields.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from workloads.choices import Verdict
from workloads.models import Workload

BATCH = 1000


def workload_locality_write(*, rows: Iterable[tuple[int, dict[str, Any]]]) -> int:
    """Store each (workload id, locality record) with its `verdict` (the record's, else
    unknown) in bulk; returns the rows written. Ids of workloads gone since are skipped."""
    records = dict(rows)
    if not records:
        return 0
    present = set(Workload.objects.filter(pk__in=records).values_list("pk", flat=True))
    changed = [
        Workload(pk=pk, locality=record, verdict=_verdict(record))
        for pk, record in records.items()
        if pk in present
    ]
    Workload.objects.bulk_update(changed, ["locality", "verdict"], batch_size=BATCH)
    return len(changed)


def _verdict(record: dict[str, Any]) -> str:
    verdict = str(record.get("verdict") or "")
    return verdict if verdict in Verdict.values else Verdict.UNKNOWN
