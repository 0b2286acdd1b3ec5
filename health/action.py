"""When a GPU needs action (drain, reset, reboot, RMA), and why: the one rule that the health
page, the GPUs page, the overview, placement, failure domains and capacity all read.

A GPU needs action when, the first that holds being its reason:

1. it is lost and still holds its slot (its server's last report no longer shows it, and no
   other GPU has been reported at its PCI address since): "lost: fell off the bus" where it is
   still on the PCI bus (a GPU NVML never listed, or its server has an open "GPU on the PCI
   bus, not in NVML" finding), else "lost: no longer reported". A lost GPU whose slot holds
   another board is history (an RMA's old row), not a GPU to act on;
2. NVML queries on it fail;
3. a health finding about it is open ("open health finding: Fatal Xid 79");
4. its server has an open critical finding of any family about the server itself, not about
   one of its GPUs ("server has a critical finding: GPU on the PCI bus, not in NVML").

The finding it names is its own most serious open health finding, else its server's first
critical one (most serious first, then the oldest).

The rule is written twice on purpose, side by side: `gpu_action` over plain facts (a GPU's
`GpuFacts` and the open findings about it and its server), and in SQL `action_reason_code`
and `action_finding_id` (annotations of a Gpu queryset) with `candidates_q`, a cheap superset
that keeps the fleet's healthy GPUs in the database. `tests/health/test_action.py` feeds the
same rows to both. No queries run here: the SQL form is expressions for a caller's query.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import models
from django.db.models import Case, Exists, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Coalesce

from findings.choices import SEVERITY_ORDER, Family, FindingType, Severity, family_q
from findings.models import Finding
from inventory.choices import GpuStatus
from inventory.models import Gpu


class ActionReason(models.TextChoices):
    """Why a GPU needs action, in the rule's order (`action_reason_code` counts from 1)."""

    LOST_OFF_BUS = "lost_off_bus", "lost: fell off the bus"
    LOST = "lost", "lost: no longer reported"
    NVML_ERROR = "nvml_error", "NVML error: failing NVML queries"
    HEALTH_FINDING = "health_finding", "open health finding"
    SERVER_CRITICAL = "server_critical", "server has a critical finding"


REASONS: tuple[ActionReason, ...] = tuple(ActionReason)

OPEN = Q(resolved_at__isnull=True)
OPEN_HEALTH: Q = family_q(Family.HEALTH) & OPEN
"""Open findings of the health rules (about a GPU, a slot or a server)."""

SERVER_CRITICAL: Q = OPEN & Q(severity=Severity.CRITICAL, gpu__isnull=True, server__isnull=False)
"""Open critical findings about a server itself (any family): every GPU of it needs action."""


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """What the rule reads of a GPU row."""

    id: int
    server_id: int
    status: str = GpuStatus.OK
    uuid_synthetic: bool = False
    slot_taken: bool = False
    """Another GPU of its server, not lost, sits at its (non-empty) PCI address."""


@dataclass(frozen=True, slots=True)
class OpenFinding:
    """An open finding as the rule reads it (`Finding` fields)."""

    id: int
    type: str
    severity: str
    server_id: int | None
    gpu_id: int | None
    first_seen: datetime
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def health(self) -> bool:
        return self.type in FindingType.of_family(Family.HEALTH)


@dataclass(frozen=True, slots=True)
class GpuAction:
    """A GPU's reason to act (an ActionReason value) and the finding it names, if any."""

    reason: str
    finding_id: int | None = None

    @property
    def code(self) -> int:
        return REASONS.index(ActionReason(self.reason)) + 1


def _rank(finding: OpenFinding) -> tuple[int, datetime, int]:
    return (SEVERITY_ORDER.index(finding.severity), finding.first_seen, finding.id)


def gpu_action(gpu: GpuFacts, findings: Iterable[OpenFinding]) -> GpuAction | None:
    """The rule over plain facts: `findings` are open findings (any may be about other GPUs or
    servers; those are ignored). None: the GPU needs no action."""
    if gpu.status == GpuStatus.LOST and gpu.slot_taken:
        return None
    findings = list(findings)
    own = sorted((f for f in findings if f.gpu_id == gpu.id and f.health), key=_rank)
    server = sorted(
        (
            f
            for f in findings
            if f.gpu_id is None and f.server_id == gpu.server_id and f.severity == Severity.CRITICAL
        ),
        key=_rank,
    )
    named = own[0] if own else server[0] if server else None
    finding_id = named.id if named else None
    if gpu.status == GpuStatus.LOST:
        off_bus = gpu.uuid_synthetic or any(f.type == FindingType.GPU_NOT_IN_NVML for f in server)
        return GpuAction(ActionReason.LOST_OFF_BUS if off_bus else ActionReason.LOST, finding_id)
    if gpu.status == GpuStatus.ERROR:
        return GpuAction(ActionReason.NVML_ERROR, finding_id)
    if own:
        return GpuAction(ActionReason.HEALTH_FINDING, finding_id)
    if server:
        return GpuAction(ActionReason.SERVER_CRITICAL, finding_id)
    return None


def slots_taken(gpus: Iterable[Mapping[str, Any]]) -> set[int]:
    """Ids of the lost GPUs (`values()` rows: id, server_id, pci_bus_id, status) whose slot
    another GPU, not lost, holds: the plain-values form of `_slot_taken`."""
    rows = list(gpus)
    held = {
        (r["server_id"], r["pci_bus_id"])
        for r in rows
        if r["status"] != GpuStatus.LOST and r["pci_bus_id"]
    }
    return {
        r["id"]
        for r in rows
        if r["status"] == GpuStatus.LOST
        and r["pci_bus_id"]
        and (r["server_id"], r["pci_bus_id"]) in held
    }


def action_words(reason: str, finding_type: str | None, details: Mapping[str, Any] | None) -> str:
    """The reason in words: `lost: fell off the bus`, `open health finding: Fatal Xid 79`,
    `server has a critical finding: GPU on the PCI bus, not in NVML`."""
    label = str(ActionReason(reason).label)
    if reason not in (ActionReason.HEALTH_FINDING, ActionReason.SERVER_CRITICAL):
        return label
    return f"{label}: {finding_words(finding_type, details)}" if finding_type else label


def finding_words(finding_type: str | None, details: Mapping[str, Any] | None = None) -> str:
    """A finding type in words, a fatal Xid with its codes (`Fatal Xid 79`)."""
    if not finding_type:
        return ""
    codes = (details or {}).get("codes") if isinstance(details, Mapping) else None
    if finding_type == FindingType.GPU_FATAL_XID and codes:
        return "Fatal " + ", ".join(str(c) for c in codes)
    # By the choices, not `FindingType(value)`: mypy reads that as the two-argument __new__.
    label = dict(FindingType.choices).get(finding_type)
    return str(label) if label is not None else finding_type.replace("_", " ")


# -- the same rule in SQL (annotations of a Gpu queryset) -----------------------------------


def _by_rank(findings: models.QuerySet[Finding]) -> models.QuerySet[Finding]:
    rank = Case(
        *(When(severity=s, then=Value(i)) for i, s in enumerate(SEVERITY_ORDER)),
        default=Value(len(SEVERITY_ORDER)),
        output_field=models.IntegerField(),
    )
    return findings.annotate(_rank=rank).order_by("_rank", "first_seen", "id")


def _own() -> models.QuerySet[Finding]:
    return Finding.objects.filter(OPEN_HEALTH, gpu_id=OuterRef("pk"))


def _server() -> models.QuerySet[Finding]:
    return Finding.objects.filter(SERVER_CRITICAL, server_id=OuterRef("server_id"))


def _slot_taken() -> Exists:
    return Exists(
        Gpu.objects.filter(server_id=OuterRef("server_id"), pci_bus_id=OuterRef("pci_bus_id"))
        .exclude(pci_bus_id="")
        .exclude(status=GpuStatus.LOST)
    )


def action_reason_code() -> Case:
    """Per GPU row: 0 when it needs no action, else 1 + the index of its reason in REASONS."""
    lost = Q(status=GpuStatus.LOST)
    off_bus = Q(uuid_synthetic=True) | Exists(_server().filter(type=FindingType.GPU_NOT_IN_NVML))
    return Case(
        When(lost & _slot_taken(), then=Value(0)),
        When(lost & off_bus, then=Value(1)),
        When(lost, then=Value(2)),
        When(status=GpuStatus.ERROR, then=Value(3)),
        When(Exists(_own()), then=Value(4)),
        When(Exists(_server()), then=Value(5)),
        default=Value(0),
        output_field=models.IntegerField(),
    )


def action_finding_id() -> Coalesce:
    """Per GPU row: the id of the finding its reason names (see the module), or null."""
    return Coalesce(
        Subquery(_by_rank(_own()).values("id")[:1]),
        Subquery(_by_rank(_server()).values("id")[:1]),
        output_field=models.BigIntegerField(),
    )


def reason_of_code(code: int) -> str | None:
    """The ActionReason value `action_reason_code` numbered `code`; None for 0."""
    return REASONS[code - 1].value if code else None


def candidates_q() -> Q:
    """A superset of the GPUs needing action, as cheap semi-joins: lost or failing NVML, with an
    open health finding, or on a server with a critical one. Filter by it before annotating
    `action_reason_code`, so a fleet of healthy GPUs is never judged row by row."""
    # One IN over a union of three small id sets, each read by an index (gpu_failing_status,
    # the findings' own), not an OR of three tests on every GPU: an OR of semi-joins is a
    # sequential scan of the fleet, 100-150 ms a page at 200k GPUs (bench/lists.py).
    # (Unordered: SQLite takes no ORDER BY in a part of a UNION.)
    failing = Gpu.objects.filter(status__in=(GpuStatus.LOST, GpuStatus.ERROR)).order_by()
    with_finding = Finding.objects.filter(OPEN_HEALTH, gpu__isnull=False).order_by()
    critical = Finding.objects.filter(SERVER_CRITICAL).order_by().values("server_id")
    on_critical = Gpu.objects.filter(server_id__in=critical).order_by()
    return Q(
        pk__in=failing.values("pk").union(with_finding.values("gpu_id"), on_critical.values("pk"))
    )
