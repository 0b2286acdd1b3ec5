"""Findings as Alertmanager v2 alerts: pure functions from a finding's facts to an alert.

Alertmanager identifies an alert by its label set, so the labels hold what names the
finding (type, subject, where it is) and nothing that changes while it is open; the message
goes in the annotations.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.urls import reverse

from core.links import workload_path
from health.models import holder_words

FINDING_FIELDS = (
    "id",
    "type",
    "severity",
    "subject",
    "message",
    "first_seen",
    "resolved_at",
    "server_id",
    "server__hostname",
    "node_id",
    "node__name",
    "cluster__name",
    "node__cluster__name",
    "reopened_count",
    "gpu_id",
    "gpu__serial",
)
"""The Finding `values()` the functions here read."""


def rfc3339(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def finding_page_url(finding: Mapping[str, Any], *, public_url: str) -> str:
    """An absolute link to the finding's own page: what it is, since when, its runbook, and
    where a person acknowledges or silences it."""
    return public_url + reverse("finding-detail", args=[finding["id"]])


def workload_payload(holder: Mapping[str, Any], *, public_url: str) -> dict[str, Any]:
    """The `workload` of a webhook body: the job or pod that held the finding's GPU when the
    finding was raised (`workloads.services.holders.gpu_holders_at`)."""
    return {
        "id": holder["workload_id"],
        "scheduler_id": holder["scheduler_id"],
        "kind": holder["kind"],
        "cluster": holder["cluster"],
        "user": holder["user"],
        "account": holder["account"],
        "words": holder_words(holder),
        "url": public_url + workload_path(holder["workload_id"]),
    }


def finding_labels(
    finding: Mapping[str, Any], holder: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """What names the alert. `holder` (the workload on the finding's GPU when it was raised)
    adds `workload` and `workload_user`: fixed for the finding's life, as labels must be,
    once the jobs listing that names it has arrived."""
    holder = holder or {}
    labels = {
        "alertname": finding["type"],
        "severity": finding["severity"],
        "subject": finding["subject"],
        "server": finding.get("server__hostname") or "",
        "node": finding.get("node__name") or "",
        "cluster": finding.get("cluster__name") or finding.get("node__cluster__name") or "",
        "workload": holder.get("scheduler_id") or "",
        "workload_user": holder.get("user") or "",
        "source": "cluster-atlas",
    }
    return {k: v for k, v in labels.items() if v}  # Alertmanager drops empty labels itself


def finding_alert(
    finding: Mapping[str, Any],
    *,
    now: datetime,
    ends_at: datetime,
    public_url: str,
    holder: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The v2 alert of a finding: open ones end at `ends_at` (ahead of the next re-send),
    resolved ones at their resolved time; with the workload on its GPU (`holder`) named."""
    resolved_at = finding.get("resolved_at")
    annotations = {"summary": finding["message"], "description": finding["message"]}
    if holder:
        annotations["workload"] = holder_words(holder)
    return {
        "labels": finding_labels(finding, holder),
        "annotations": annotations,
        "startsAt": rfc3339(finding["first_seen"]),
        "endsAt": rfc3339(resolved_at if resolved_at is not None else ends_at),
        "generatorURL": finding_page_url(finding, public_url=public_url),
    }
