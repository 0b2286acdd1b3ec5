"""Open findings to Alertmanager, and resolved ones with their end.

Alertmanager forgets an alert at its `endsAt`, so every open finding is re-sent each run
with `endsAt` a few intervals ahead; a finding resolved since the last run is sent once more
with `endsAt` = its resolved time. Findings are read by a time watermark, not by a hook in
reconciliation: the reconciler does not know Alertmanager exists. The watermark moves only
after Alertmanager accepted the batch, and the scan overlaps the previous one, so a finding
committed late is still seen (re-sending a resolved alert is harmless).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import requests
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from findings.models import Finding
from findings.selectors import silenced_q

from ..alerts import FINDING_FIELDS, finding_alert
from ..selectors import finding_holders
from .watermarks import watermark_get, watermark_set

logger = logging.getLogger(__name__)

WATERMARK = "alertmanager"
OVERLAP = timedelta(minutes=10)
BATCH = 500


def _ends_at(now: datetime) -> datetime:
    # Three intervals: one missed run (a worker restart) does not resolve every alert.
    return now + timedelta(seconds=3 * max(settings.ATLAS_ALERT_INTERVAL_S, 60))


def alerts_due(*, now: datetime, since: datetime) -> list[dict]:
    """The alerts of every open finding and of those resolved at or after `since`."""
    rows = list(
        Finding.objects.filter(Q(resolved_at__isnull=True) | Q(resolved_at__gte=since))
        .exclude(silenced_q(now))  # a person silenced it: no alert until the silence ends
        .order_by("id")
        .values(*FINDING_FIELDS)
    )
    ends_at = _ends_at(now)
    holders = finding_holders(rows)
    return [
        finding_alert(
            row, now=now, ends_at=ends_at, public_url=settings.ATLAS_PUBLIC_URL, holder=holder
        )
        for row, holder in zip(rows, holders, strict=True)
    ]


def alertmanager_push(*, now: datetime | None = None, url: str | None = None) -> int:
    """POST the due alerts to `<url>/api/v2/alerts`; the number sent. 0 when no URL is set.

    Raises requests.RequestException when Alertmanager refuses or is away (the task retries;
    the watermark stays, so nothing resolved meanwhile is missed).
    """
    url = (url if url is not None else settings.ATLAS_ALERTMANAGER_URL).rstrip("/")
    if not url:
        return 0
    now = now or timezone.now()
    last = watermark_get(WATERMARK)
    since = (last or now) - OVERLAP
    alerts = alerts_due(now=now, since=since)
    for start in range(0, len(alerts), BATCH):
        response = requests.post(
            f"{url}/api/v2/alerts", json=alerts[start : start + BATCH], timeout=10
        )
        response.raise_for_status()
    watermark_set(WATERMARK, now)
    logger.info("alertmanager: sent %d alerts", len(alerts))
    return len(alerts)
