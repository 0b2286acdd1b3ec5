"""Reads of findings, each a fixed number of queries: the lists of every page and the API,
the counts of the overview and alerting."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from .facts import by_severity, severity_rank
from .models import Finding


def silenced_q(now: datetime | None = None) -> Q:
    """Findings under a silence that has not expired: kept out of counts and alerting."""
    return Q(silenced_until__gt=now or timezone.now())


def finding_list() -> QuerySet[Finding]:
    return Finding.objects.select_related(
        "server",
        "node",
        "node__cluster",
        "cluster",
        "ack_by",
        "silenced_by",
        "ack_withdrawn_by",
        "silence_lifted_by",
    ).annotate(severity_rank=severity_rank())


def open_findings_by_severity() -> dict[str, int]:
    """Open findings per severity, silenced ones left out."""
    return dict(
        Finding.objects.filter(resolved_at__isnull=True)
        .exclude(silenced_q())
        .order_by()
        .values_list("severity")
        .annotate(n=Count("id"))
    )


def open_findings(
    *,
    server_id: int | None = None,
    node_id: int | None = None,
    limit: int | None = None,
    include_silenced: bool = True,
) -> QuerySet[Finding]:
    """Open findings, the most severe first, ties by id (of one server or node when given)."""
    findings = by_severity(finding_list().filter(resolved_at__isnull=True))
    if not include_silenced:
        findings = findings.exclude(silenced_q())
    if server_id is not None:
        findings = findings.filter(server_id=server_id)
    if node_id is not None:
        findings = findings.filter(node_id=node_id)
    return findings[:limit] if limit is not None else findings


def top_open_findings(*, limit: int = 8) -> dict:
    """The overview's findings: the first `limit` open, unsilenced ones and how many more
    there are (two queries)."""
    findings = open_findings(include_silenced=False)
    shown = list(findings[:limit])
    return {"shown": shown, "more": findings.count() - len(shown)}


def finding_cluster_names() -> list[str]:
    """Every cluster's name, for the findings page's cluster filter (one query). The cluster
    model is reached through the finding's own foreign key: this app imports no clusters/."""
    clusters = Finding._meta.get_field("cluster").related_model._default_manager
    return list(clusters.order_by("name").values_list("name", flat=True))
