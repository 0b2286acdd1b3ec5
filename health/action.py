"""When a GPU needs action (drain, reset or RMA): the one rule that the health page, placement,
failure domains, the capacity planner and the overview all read.

A GPU needs action while a health rule's finding about it is open: a `findings.Finding` of the
health family, whose `gpu` is set, and which is not resolved. Findings about a
slot or a server (no GPU) are actions too, but take no one GPU out of service; they count
under `OPEN_HEALTH`, not `NEEDS_ACTION`.

Written as SQL conditions only (a GPU's open findings are rows, never a column of the GPU),
so lists and aggregates judge every GPU in the query that reads them.
"""

from __future__ import annotations

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from findings.choices import Family, FindingType, family_q
from findings.models import Finding
from inventory.choices import GpuStatus
from inventory.models import Gpu

OPEN_HEALTH: Q = family_q(Family.HEALTH) & Q(resolved_at__isnull=True)
"""Open findings of the health rules (about a GPU, a slot or a server)."""

NEEDS_ACTION: Q = OPEN_HEALTH & Q(gpu__isnull=False)
"""Open health findings about one GPU: that GPU needs action."""


def findings_needing_action() -> QuerySet[Finding]:
    """The open health findings that take a GPU out of service."""
    return Finding.objects.filter(NEEDS_ACTION)


def gpu_needs_action(gpu: str = "pk") -> Exists:
    """Per GPU row in SQL (`gpu` names its id column): True while it needs action."""
    return Exists(findings_needing_action().filter(gpu_id=OuterRef(gpu)))


def action_label(finding_type: str | None) -> str:
    """A health finding type in words (`Fatal Xid on a GPU`)."""
    if not finding_type:
        return ""
    try:
        return str(FindingType(finding_type).label)
    except ValueError:
        return finding_type.replace("_", " ")


def gpus_needing_action_by_type() -> list[dict[str, object]]:
    """GPUs needing action per finding type, the most GPUs first, with the type's words (a GPU
    with two findings counts under each: `gpus_needing_action_count` is the distinct total).
    One query."""
    rows = (
        findings_needing_action()
        .order_by()
        .values("type")
        .annotate(gpus=Count("gpu_id", distinct=True))
        .order_by("-gpus", "type")
    )
    return [{"type": r["type"], "label": action_label(r["type"]), "gpus": r["gpus"]} for r in rows]


def gpus_needing_action_count() -> int:
    """Distinct GPUs needing action, fleet-wide (one query)."""
    return findings_needing_action().order_by().values("gpu_id").distinct().count()


def needing_action_share() -> float:
    """The share (0..1) of the fleet's GPUs (lost ones excluded) needing action (one query)."""
    counts = Gpu.objects.exclude(status=GpuStatus.LOST).aggregate(
        gpus=Count("id"), needing=Count("id", filter=Q(gpu_needs_action()))
    )
    return counts["needing"] / counts["gpus"] if counts["gpus"] else 0.0
