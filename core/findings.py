"""The one shape every rule family returns: clusters/rules, health/rules and fabric/rules.

It lives in core because those three apps do not import each other; each reconciler writes
the facts its rules return as `clusters.Finding` rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
