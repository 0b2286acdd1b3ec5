"""When a GPU is unhealthy, and why: one rule for the GPU list, findings, placement and failure
domains, so that they name the same GPUs.

A GPU is unhealthy when it is lost (its server's last report no longer shows it), fails NVML
queries, has a failed row remap, has page retirement or a row remap pending a reset, or has
uncorrected ECC errors. A lost GPU is lost and nothing else: its last counters are old news.

The rule is written twice on purpose, once per medium, side by side in `_RULES`: `gpu_health`
over plain values (a `values()` row, a report's GPU) and SQL conditions (`UNHEALTHY`,
`problem_q`, `gpu_problem_code`) for querysets and aggregates, so a list never loads rows
to judge them. A test feeds the same rows through both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import reduce
from operator import or_
from typing import Any

from django.db import models
from django.db.models import Case, Q, Value, When

from .choices import GpuStatus


class GpuProblem(models.TextChoices):
    """Why a GPU is unhealthy, the most serious first."""

    LOST = "lost", "lost"
    NVML_ERROR = "nvml_error", "failing NVML queries"
    ROW_REMAP_FAILED = "row_remap_failed", "row remap failed"
    RESET_PENDING = "reset_pending", "page retirement or row remap pending a reset"
    UNCORRECTED_ECC = "uncorrected_ecc", "uncorrected ECC errors"


HEALTH_FIELDS = (
    "status",
    "remapped_rows_failure",
    "retired_pages_pending",
    "remapped_rows_pending",
    "ecc_errors_uncorrected",
)
"""The Gpu fields the rule reads; `gpu_health` takes a mapping with these keys."""

_LOST = Q(status=GpuStatus.LOST)
_RULES: tuple[tuple[GpuProblem, Callable[[Mapping[str, Any]], bool], Q], ...] = (
    (
        GpuProblem.NVML_ERROR,
        lambda f: f.get("status") == GpuStatus.ERROR,
        Q(status=GpuStatus.ERROR),
    ),
    (
        GpuProblem.ROW_REMAP_FAILED,
        lambda f: bool(f.get("remapped_rows_failure")),
        Q(remapped_rows_failure=True),
    ),
    (
        GpuProblem.RESET_PENDING,
        lambda f: bool(f.get("retired_pages_pending") or f.get("remapped_rows_pending")),
        Q(retired_pages_pending=True) | Q(remapped_rows_pending=True),
    ),
    (
        GpuProblem.UNCORRECTED_ECC,
        lambda f: (f.get("ecc_errors_uncorrected") or 0) > 0,
        Q(ecc_errors_uncorrected__gt=0),
    ),
)
"""Every problem but `lost`, in order: its test over plain values and its SQL condition."""

PROBLEMS: tuple[GpuProblem, ...] = (GpuProblem.LOST, *(p for p, _, _ in _RULES))
"""The problems in order of seriousness; `gpu_problem_code` counts from 1 in this order."""

UNHEALTHY: Q = reduce(or_, (q for _, _, q in _RULES), _LOST)
"""The SQL condition of an unhealthy GPU (`Gpu.objects.unhealthy()`)."""


@dataclass(frozen=True, slots=True)
class GpuHealth:
    """A GPU's health: `reasons` are GpuProblem values, the most serious first."""

    healthy: bool
    reasons: tuple[str, ...] = ()

    @property
    def problem(self) -> str | None:
        """The most serious reason, None for a healthy GPU."""
        return self.reasons[0] if self.reasons else None

    @property
    def counter_texts(self) -> tuple[str, ...]:
        """The reasons read from error counters, in words (the GPU's status says the others)."""
        by_status = (GpuProblem.LOST, GpuProblem.NVML_ERROR)
        return tuple(GpuProblem(r).label for r in self.reasons if r not in by_status)


HEALTHY = GpuHealth(healthy=True)


def gpu_health(facts: Mapping[str, Any]) -> GpuHealth:
    """The health of one GPU from its HEALTH_FIELDS (missing or None values are no problem)."""
    if facts.get("status") == GpuStatus.LOST:
        return GpuHealth(healthy=False, reasons=(GpuProblem.LOST.value,))
    reasons = tuple(problem.value for problem, test, _ in _RULES if test(facts))
    return GpuHealth(healthy=False, reasons=reasons) if reasons else HEALTHY


def problem_q(problem: str) -> Q:
    """The SQL condition of GPUs whose reasons include `problem` (the same as `gpu_health`)."""
    if problem == GpuProblem.LOST:
        return _LOST
    for candidate, _, q in _RULES:
        if candidate == problem:
            return ~_LOST & q
    raise ValueError(f"not a GPU problem: {problem!r}")


def gpu_problem_code() -> Case:
    """Per GPU in SQL: 0 when healthy, else 1 + the index of its first reason in PROBLEMS."""
    whens = [When(_LOST, then=Value(1))]
    whens += [When(q, then=Value(i)) for i, (_, _, q) in enumerate(_RULES, start=2)]
    return Case(*whens, default=Value(0), output_field=models.IntegerField())


def problem_of_code(code: int) -> str | None:
    """The reason `gpu_problem_code` numbered `code`; None for 0 (healthy)."""
    return PROBLEMS[code - 1].value if code else None
