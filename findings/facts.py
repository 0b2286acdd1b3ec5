"""The one shape every rule family returns (clusters/rules, health/rules, fabric/rules), and
the one order of every list of findings.

Plain data: the rules stay pure; each family's writer hands its facts to
`findings.services.findings_write`, which keeps them as `findings.Finding` rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Case, IntegerField, QuerySet, Value, When

from .choices import SEVERITY_ORDER


@dataclass(frozen=True, slots=True)
class FindingFact:
    """A finding a rule says should be open now: what, how bad, about what, in words.

    `subject` names what the finding is about and stays the same across runs (`node:12`,
    `server:7`, `cluster:3:driver`); the ids say which rows it links to; `action` is the
    next step where a rule knows one.
    """

    type: str
    severity: str
    subject: str
    message: str
    server_id: int | None = None
    node_id: int | None = None
    cluster_id: int | None = None
    gpu_id: int | None = None
    action: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.type, self.subject)


def severity_rank() -> Case:
    """SQL for a finding's place in `SEVERITY_ORDER`: 0 for critical, unknown ones last."""
    return Case(
        *(When(severity=s, then=Value(rank)) for rank, s in enumerate(SEVERITY_ORDER)),
        default=Value(len(SEVERITY_ORDER)),
        output_field=IntegerField(),
    )


def by_severity(findings: QuerySet) -> QuerySet:
    """The one order of every list of findings: the most severe first, ties by id (oldest
    first). Not by `last_seen`, which every reconciliation moves: a list that reshuffles each
    minute loses the reader's place."""
    return findings.annotate(severity_rank=severity_rank()).order_by("severity_rank", "id")
