"""Celery tasks of the placement app: keeping the per-server summaries fresh, judging how well
running workloads are placed. Thin over `summaries` and `workload_verdicts`."""

from __future__ import annotations

from celery import shared_task

from core.tasks import retry_policy

from .leaf_summaries import leaf_summaries_refresh
from .summaries import placement_summaries_refresh
from .workload_verdicts import judge_workloads as workload_judge


@shared_task(
    acks_late=True,
    ignore_result=True,
    time_limit=600,
    soft_time_limit=570,
    **retry_policy(),
)
def refresh_placement_summaries(limit: int = 50_000) -> int:
    """Rebuild the placement summaries that reports made stale (one query when none is). A
    server whose summary cannot be built is logged and left to its rows until its report
    changes; the others are rebuilt (`summaries.placement_summaries_refresh`). Then the leaf
    summaries, when the fabric revision moved (`leaf_summaries.leaf_summaries_refresh`: two
    queries when it did not)."""
    done = placement_summaries_refresh(limit=limit)
    leaf_summaries_refresh()
    return done


@shared_task(
    acks_late=True,
    ignore_result=True,
    time_limit=600,
    soft_time_limit=570,
    **retry_policy(),
)
def judge_workloads(force: bool = False) -> int:
    """Judge how well the running workloads are placed (`workload_verdicts.judge_workloads`):
    those whose GPUs or start changed since their last judgement. Beat runs it; the
    integrator calls it after a jobs snapshot applies. Returns the workloads judged."""
    return workload_judge(force=force).judged
