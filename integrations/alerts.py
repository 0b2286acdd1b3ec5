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
)
"""The Finding `values()` the functions here read."""


def rfc3339(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def finding_page_url(finding: Mapping[str, Any], *, public_url: str) -> str:
    """An absolute link to the finding's own page: what it is, since when, its runbook, and
    where a person acknowledges or silences it."""
    return public_url + reverse("finding-detail", args=[finding["id"]])


def finding_labels(finding: Mapping[str, Any]) -> dict[str, str]:
    labels = {
        "alertname": finding["type"],
        "severity": finding["severity"],
        "subject": finding["subject"],
        "server": finding.get("server__hostname") or "",
        "node": finding.get("node__name") or "",
        "cluster": finding.get("cluster__name") or finding.get("node__cluster__name") or "",
        "source": "cluster-atlas",
    }
    return {k: v for k, v in labels.items() if v}  # Alertmanager drops empty labels itself


def finding_alert(
    finding: Mapping[str, Any], *, now: datetime, ends_at: datetime, public_url: str
) -> dict[str, Any]:
    """The v2 alert of a finding: open ones end at `ends_at` (ahead of the next re-send),
    resolved ones at their resolved time."""
    resolved_at = finding.get("resolved_at")
    return {
        "labels": finding_labels(finding),
        "annotations": {"summary": finding["message"], "description": finding["message"]},
        "startsAt": rfc3339(finding["first_seen"]),
        "endsAt": rfc3339(resolved_at if resolved_at is not None else ends_at),
        "generatorURL": finding_page_url(finding, public_url=public_url),
    }
