"""Format detection for workload listings: one entry point per input kind.

``parse_jobs_document`` takes a decoded JSON object (slurmctld jobs from slurmrestd or
``squeue --json``, or accounting from ``sacct --json``/slurmdbd); ``parse_jobs_text`` takes
text (``scontrol show job -d``, or any of those JSON documents as text). Every failure is a
WorkloadFormatError with a ``path`` and a message that never echoes the input, so the API
can answer a field-level 400 and change nothing. Node listings are refused here, as jobs
listings are by clusters' node detector: the two never read each other's documents.
"""

from __future__ import annotations

from datetime import UTC, tzinfo
from typing import Any

from core.safe_input import InputRejected, json_loads
from workloads.parsers import scontrol_job, slurm_accounting_json, slurm_jobs_json
from workloads.records import JobsSnapshot, WorkloadFormatError

_NODE_KEYS = ("nodes", "sinfo", "items")


def looks_like_jobs_document(document: dict[str, Any]) -> bool:
    """True for a JSON object holding a Slurm ``jobs`` list (and no node list)."""
    return (
        isinstance(document, dict)
        and isinstance(document.get("jobs"), list)
        and not any(isinstance(document.get(k), list) for k in _NODE_KEYS)
    )


def looks_like_jobs_text(text: str) -> bool:
    """True for ``scontrol show job`` text, or JSON text that is a jobs document."""
    stripped = text.lstrip()
    if scontrol_job.looks_like(stripped):
        return True
    if not stripped.startswith("{"):
        return False
    try:
        document = json_loads(stripped)
    except InputRejected:
        return False
    return isinstance(document, dict) and looks_like_jobs_document(document)


def parse_jobs_document(document: Any, *, complete: bool = True) -> JobsSnapshot:
    """A jobs snapshot from a decoded JSON document.

    ``complete=False`` is for slurmrestd ``/job/{id}`` (one job, which says nothing of the
    others); accounting is always history (``complete=False``, ``history=True``).
    """
    if not isinstance(document, dict):
        raise WorkloadFormatError("the document is not a JSON object")
    if not looks_like_jobs_document(document):
        if any(isinstance(document.get(k), list) for k in _NODE_KEYS):
            raise WorkloadFormatError("this is a node listing, not a jobs listing", "jobs")
        raise WorkloadFormatError("the document has no jobs list", "jobs")
    if slurm_accounting_json.looks_like(document):
        return slurm_accounting_json.parse_accounting_json(document)
    return slurm_jobs_json.parse_jobs_json(document, complete=complete)


def parse_jobs_text(text: str, *, tz: tzinfo = UTC, complete: bool = True) -> JobsSnapshot:
    """A jobs snapshot from text: ``scontrol show job -d`` (times read in ``tz``, the
    cluster's zone) or a JSON jobs document."""
    if not isinstance(text, str):
        raise WorkloadFormatError("the listing is not text")
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            document = json_loads(stripped)
        except InputRejected as exc:
            raise WorkloadFormatError(
                "the JSON is not valid (cut short?)", exc.path or "body"
            ) from None
        return parse_jobs_document(document, complete=complete)
    if scontrol_job.looks_like(stripped):
        return scontrol_job.parse_scontrol_jobs(text, tz=tz)
    raise WorkloadFormatError(
        "not a jobs listing this project reads (scontrol show job -d, squeue --json, "
        "slurmrestd or slurmdbd jobs, sacct --json)"
    )
