"""Stored agent reports: how many are kept."""

from __future__ import annotations

from django.conf import settings
from django.db.models import OuterRef, Subquery

from ..choices import ReportStatus
from ..models import Report


def report_prune(*, keep: int | None = None) -> int:
    """Delete all but the newest `keep` reports per server (ATLAS_REPORT_RETENTION by default);
    pending reports are never deleted. Returns how many went."""
    keep = settings.ATLAS_REPORT_RETENTION if keep is None else keep
    newest = (
        Report.objects.filter(server=OuterRef("server"))
        .order_by("-id")
        .values("id")[keep - 1 : keep]
    )
    cutoff = (
        Report.objects.filter(server__isnull=False)
        .annotate(cut=Subquery(newest))
        .filter(cut__isnull=False, id__lt=Subquery(newest))
    )
    deleted, _ = cutoff.exclude(status=ReportStatus.PENDING).delete()
    return deleted
