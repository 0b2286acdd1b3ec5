"""The one writer of `clusters.Finding`: every layer's rules return `FindingFact`s, and this
turns the facts a pass wants open into rows (raise, reopen, update, resolve).

Reconciliation, the health rules and the fabric rules each call it with a `scope`, the
findings that pass answers for, so no pass resolves another's findings. It lives beside the
Finding model it writes (docs/architecture.md: the one exception to "never each other").
"""

from __future__ import annotations

from django.db.models import Q

from core.findings import FindingFact

from .models import Finding

BATCH = 2000


def write_findings(
    desired: dict[tuple[str, str], FindingFact], now, scope: Q | None = None
) -> tuple[int, int, int]:
    """Raise new findings, reopen returned ones, resolve the ones whose cause is gone.

    `scope` limits what this pass answers for (the findings it may resolve); every finding
    by default. Returns (raised, resolved, open in scope).
    """
    findings = Finding.objects.filter(scope) if scope is not None else Finding.objects.all()
    existing = {
        (row[0], row[1]): row[2:]
        for row in findings.values_list(
            "type",
            "subject",
            "id",
            "resolved_at",
            "reopened_count",
            "message",
            "severity",
            "server_id",
            "node_id",
            "cluster_id",
            "gpu_id",
            "action",
        )
    }
    upserts, raised = [], 0
    for key, d in desired.items():
        old = existing.get(key)
        reopened = 0
        if old is not None:
            _id, resolved_at, reopened, *current = old
            unchanged = tuple(current) == (
                d.message,
                d.severity,
                d.server_id,
                d.node_id,
                d.cluster_id,
                d.gpu_id,
                d.action,
            )
            if resolved_at is None and unchanged:
                continue
            if resolved_at is not None:
                reopened += 1
                raised += 1
        else:
            raised += 1
        upserts.append(
            Finding(
                type=d.type,
                severity=d.severity,
                subject=d.subject,
                message=d.message,
                details=d.details,
                server_id=d.server_id,
                node_id=d.node_id,
                cluster_id=d.cluster_id,
                gpu_id=d.gpu_id,
                action=d.action,
                first_seen=now,
                last_seen=now,
                resolved_at=None,
                reopened_count=reopened,
            )
        )
    Finding.objects.bulk_create(
        upserts,
        update_conflicts=True,
        unique_fields=["type", "subject"],
        update_fields=[
            "severity",
            "message",
            "details",
            "server",
            "node",
            "cluster",
            "gpu",
            "action",
            "last_seen",
            "resolved_at",
            "reopened_count",
        ],
        batch_size=BATCH,
    )
    gone = [row[0] for key, row in existing.items() if row[1] is None and key not in desired]
    resolved = 0
    for start in range(0, len(gone), BATCH):
        resolved += Finding.objects.filter(id__in=gone[start : start + BATCH]).update(
            resolved_at=now, last_seen=now
        )
    findings.filter(resolved_at__isnull=True).exclude(last_seen=now).update(last_seen=now)
    return raised, resolved, len(desired)
