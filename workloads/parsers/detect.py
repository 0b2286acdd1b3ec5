"""Placeholder until the Slurm job parsers land (branch h1-slurm-jobs): recognises nothing."""

from __future__ import annotations

from typing import Any

from workloads.records import JobsSnapshot, WorkloadFormatError


def looks_like_jobs_document(document: dict[str, Any]) -> bool:
    return False


def looks_like_jobs_text(text: str) -> bool:
    return False


def parse_jobs_document(document: dict[str, Any]) -> JobsSnapshot:
    raise WorkloadFormatError("no jobs parser yet")


def parse_jobs_text(text: str) -> JobsSnapshot:
    raise WorkloadFormatError("no jobs parser yet")
