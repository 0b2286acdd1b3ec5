"""Signed webhooks: an outbox of deliveries filled by a scan, emptied by a task.

The scan reads findings raised or resolved since its last run (a time watermark with an
overlap, so one committed late is still seen) and creates one Delivery per (webhook, event,
finding, occurrence), idempotently: rescanning never duplicates one. Nothing of this runs in
the request or the reconciliation that raised the finding. Each delivery is claimed by a
conditional UPDATE (a lease), sent, and recorded; a failure is retried with exponential
backoff until ATLAS_WEBHOOK_RETRY_WINDOW_S after it was created, then marked failed.

Every attempt resolves the URL again and refuses an address inside the network
(integrations/destinations.py), then connects to the address it checked, sending the URL's
own Host and TLS server name, so a name rebound between check and connect is not followed;
redirects never are. Each webhook keeps at most ATLAS_WEBHOOK_MAX_PENDING pending
deliveries, and one that fails for its whole retry window is disabled.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import urllib3
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from requests.certs import where as ca_bundle

from findings.models import Finding
from findings.selectors import silenced_q

from ..alerts import FINDING_FIELDS, finding_page_url, rfc3339, workload_payload
from ..choices import DeliveryStatus, WebhookEvent
from ..destinations import (
    Address,
    DestinationRefused,
    Unresolvable,
    allowed_networks,
    destination_check,
)
from ..models import Delivery, Webhook
from ..selectors import finding_holders
from ..signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    signature,
)
from .watermarks import watermark_get, watermark_set

logger = logging.getLogger(__name__)

WATERMARK = "webhooks"
OVERLAP = timedelta(minutes=10)
BACKOFF_BASE_S = 10
BACKOFF_MAX_S = 3600
# Answers that a retry may fix; every other 4xx is the receiver refusing for good.
RETRYABLE_4XX = {408, 409, 425, 429}


def finding_payload(row: dict[str, Any]) -> dict[str, Any]:
    """The `finding` object of a webhook body (plain JSON; what the findings API shows)."""
    return {
        "id": row["id"],
        "type": row["type"],
        "severity": row["severity"],
        "subject": row["subject"],
        "message": row["message"],
        "first_seen": rfc3339(row["first_seen"]),
        "resolved_at": rfc3339(row["resolved_at"]) if row["resolved_at"] else None,
        "server": row["server__hostname"],
        "node": row["node__name"],
        "cluster": row["cluster__name"] or row["node__cluster__name"],
        "url": finding_page_url(row, public_url=settings.ATLAS_PUBLIC_URL),
    }


def webhook_outbox_scan(*, now: datetime | None = None) -> int:
    """Create the deliveries of findings raised or resolved since the last scan; returns how
    many were due (those a previous scan already made are left as they are).

    A webhook gets only events that happened after it was created (no backlog).
    """
    now = now or timezone.now()
    since = (watermark_get(WATERMARK) or now) - OVERLAP
    webhooks = list(Webhook.objects.filter(active=True).only("id", "events", "created_at"))
    wanted = {
        event: [w for w in webhooks if event in w.events]
        for event in (WebhookEvent.FINDING_RAISED, WebhookEvent.FINDING_RESOLVED)
    }
    if not any(wanted.values()):
        watermark_set(WATERMARK, now)
        return 0
    rows = list(
        Finding.objects.filter(Q(first_seen__gte=since) | Q(resolved_at__gte=since))
        .exclude(silenced_q(now))  # a person silenced it: no event until the silence ends
        .order_by("id")
        .values(*FINDING_FIELDS)
    )
    deliveries = []
    for row, holder in zip(rows, finding_holders(rows), strict=True):
        events = []
        if row["first_seen"] >= since:
            events.append((WebhookEvent.FINDING_RAISED, row["first_seen"]))
        if row["resolved_at"] is not None and row["resolved_at"] >= since:
            events.append((WebhookEvent.FINDING_RESOLVED, row["resolved_at"]))
        for event, at in events:
            payload: dict[str, Any] = {"finding": finding_payload(row)}
            if holder is not None:  # a finding about a GPU a job or pod held at the time
                payload["workload"] = workload_payload(holder, public_url=settings.ATLAS_PUBLIC_URL)
            deliveries += [
                Delivery(
                    webhook_id=w.pk,
                    event=event,
                    finding_id=row["id"],
                    occurrence=row["reopened_count"],
                    payload=payload,
                    created_at=now,
                    next_attempt_at=now,
                )
                for w in wanted[event]
                if at >= w.created_at
            ]
    Delivery.objects.bulk_create(deliveries, ignore_conflicts=True, batch_size=500)
    deliveries_bound(webhook_ids={d.webhook_id for d in deliveries}, now=now)
    watermark_set(WATERMARK, now)
    return len(deliveries)


def deliveries_bound(*, webhook_ids: Iterable[int], now: datetime | None = None) -> int:
    """Keep at most ATLAS_WEBHOOK_MAX_PENDING pending deliveries per webhook; how many were
    dropped. The oldest go: a receiver that comes back wants the newest state of its
    findings more than the stale start of an outage, and the queue stays bounded either way.
    Dropped ones are marked failed with the reason and counted on the webhook."""
    now = now or timezone.now()
    keep = max(settings.ATLAS_WEBHOOK_MAX_PENDING, 0)
    dropped = 0
    for webhook_id in sorted(set(webhook_ids)):
        pending = Delivery.objects.filter(webhook_id=webhook_id, status=DeliveryStatus.PENDING)
        excess = list(pending.order_by("-id").values_list("id", flat=True)[keep:])
        if not excess:
            continue
        with transaction.atomic():
            n = Delivery.objects.filter(pk__in=excess, status=DeliveryStatus.PENDING).update(
                status=DeliveryStatus.FAILED,
                next_attempt_at=now,
                last_error=f"dropped: more than {keep} deliveries were pending",
            )
            Webhook.objects.filter(pk=webhook_id).update(
                dropped_deliveries=F("dropped_deliveries") + n
            )
        logger.warning("webhook %s: %d oldest pending deliveries dropped", webhook_id, n)
        dropped += n
    return dropped


def webhook_disable(*, webhook_id: int, reason: str, now: datetime | None = None) -> None:
    """Turn a webhook off for `reason` (shown on its page and in the API); its pending
    deliveries fail with it. Staff turning it on again clears the reason."""
    now = now or timezone.now()
    with transaction.atomic():
        Webhook.objects.filter(pk=webhook_id).update(
            active=False, disabled_at=now, disabled_reason=reason[:500]
        )
        Delivery.objects.filter(webhook_id=webhook_id, status=DeliveryStatus.PENDING).update(
            status=DeliveryStatus.FAILED,
            next_attempt_at=now,
            last_error="not sent: the webhook was disabled",
        )
    logger.warning("webhook %s disabled: %s", webhook_id, reason)


def deliveries_due(*, now: datetime | None = None, limit: int = 1000) -> list[int]:
    """Ids of pending deliveries whose next attempt is due, oldest first."""
    now = now or timezone.now()
    return list(
        Delivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at", "id")
        .values_list("id", flat=True)[:limit]
    )


def delivery_body(delivery: Delivery, *, timestamp: int) -> bytes:
    """The JSON body of one attempt: id, event and timestamp are inside what is signed."""
    body = {
        "id": delivery.pk,
        "event": delivery.event,
        "timestamp": timestamp,
        **delivery.payload,
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def backoff(attempts: int) -> timedelta:
    """Wait before attempt `attempts + 1`: 10 s, 20 s, 40 s, ... at most an hour."""
    return timedelta(seconds=min(BACKOFF_BASE_S * 2 ** max(attempts - 1, 0), BACKOFF_MAX_S))


def _claim(delivery_id: int, now: datetime) -> bool:
    """Take the delivery for one attempt; False when another worker has it or it is done."""
    lease = timedelta(seconds=settings.ATLAS_WEBHOOK_TIMEOUT_S + 30)
    return bool(
        Delivery.objects.filter(
            pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now
        ).update(next_attempt_at=now + lease)
    )


def delivery_attempt(*, delivery_id: int, now: datetime | None = None) -> str:
    """Send one delivery once; its status afterwards (`pending` means: retried later).

    Never raises for the receiver's sake: what went wrong is recorded on the delivery.
    """
    now = now or timezone.now()
    if not _claim(delivery_id, now):
        return "skipped"
    delivery = Delivery.objects.select_related("webhook").get(pk=delivery_id)
    webhook = delivery.webhook
    attempts = delivery.attempts + 1
    timestamp = int(now.timestamp())
    body = delivery_body(delivery, timestamp=timestamp)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "cluster-atlas-webhooks",
        SIGNATURE_HEADER: signature(body, webhook.secret),
        DELIVERY_HEADER: str(delivery.pk),
        TIMESTAMP_HEADER: str(timestamp),
        EVENT_HEADER: delivery.event,
    }
    update: dict[str, Any] = {"attempts": attempts, "last_attempt_at": now}
    error, code, refused = "", None, False
    try:
        addresses = destination_check(
            webhook.url, allowed=allowed_networks(settings.ATLAS_WEBHOOK_ALLOWED_NETWORKS)
        )
        code = post_pinned(
            webhook.url,
            address=addresses[0],
            body=body,
            headers=headers,
            timeout=settings.ATLAS_WEBHOOK_TIMEOUT_S,
        )
        if 200 <= code < 300:
            update |= {
                "status": DeliveryStatus.DELIVERED,
                "delivered_at": now,
                "response_status": code,
                "last_error": "",
            }
            Delivery.objects.filter(pk=delivery.pk).update(**update)
            return DeliveryStatus.DELIVERED
        error = f"HTTP {code} from the receiver"
        if 300 <= code < 400:
            error += ": redirects are not followed"
    except Unresolvable as exc:
        error = str(exc)
    except DestinationRefused as exc:
        error, refused = f"refused: {exc}", True
    except urllib3.exceptions.HTTPError as exc:
        error = f"{type(exc).__name__}: could not reach the receiver"
    window_end = delivery.created_at + timedelta(seconds=settings.ATLAS_WEBHOOK_RETRY_WINDOW_S)
    out_of_window = now + backoff(attempts) > window_end
    final = refused or (
        code is not None
        and (300 <= code < 400 or (400 <= code < 500 and code not in RETRYABLE_4XX))
    )
    give_up = final or out_of_window
    update |= {
        "response_status": code,
        "last_error": error,
        "status": DeliveryStatus.FAILED if give_up else DeliveryStatus.PENDING,
        "next_attempt_at": now if give_up else now + backoff(attempts),
    }
    Delivery.objects.filter(pk=delivery.pk).update(**update)
    logger.info("webhook delivery %s attempt %d: %s", delivery.pk, attempts, error)
    if refused:
        webhook_disable(webhook_id=webhook.pk, reason=error, now=now)
    elif out_of_window and not final and not _delivered_since(webhook.pk, delivery.created_at):
        window = settings.ATLAS_WEBHOOK_RETRY_WINDOW_S
        shown = f"{window / 3600:g} h" if window >= 3600 else f"{window} s"
        webhook_disable(
            webhook_id=webhook.pk,
            reason=f"nothing delivered for its whole retry window ({shown}); last: {error}",
            now=now,
        )
    return update["status"]


def _delivered_since(webhook_id: int, since: datetime) -> bool:
    return Delivery.objects.filter(
        webhook_id=webhook_id, status=DeliveryStatus.DELIVERED, delivered_at__gte=since
    ).exists()


def post_pinned(
    url: str, *, address: Address, body: bytes, headers: dict[str, str], timeout: float
) -> int:
    """POST `body` to `url` over a connection to `address` (checked by the caller), with the
    URL's Host header and, for https, its TLS server name and certificate check; the status.

    Connecting by name would resolve it again, and a rebinding name could answer inside
    the network the second time. No redirect is followed, no proxy used, the answer's body
    is not read.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    https = parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    netloc = parts.netloc.rpartition("@")[2]
    headers = {**headers, "Host": netloc}
    if parts.username is not None:
        basic = f"{parts.username}:{parts.password or ''}"
        headers |= urllib3.util.make_headers(basic_auth=basic)
    pool: urllib3.HTTPConnectionPool
    if https:
        pool = urllib3.HTTPSConnectionPool(
            str(address),
            port,
            server_hostname=host,
            assert_hostname=host,
            cert_reqs="CERT_REQUIRED",
            ca_certs=ca_bundle(),
            retries=False,
            timeout=timeout,
        )
    else:
        pool = urllib3.HTTPConnectionPool(str(address), port, retries=False, timeout=timeout)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        response = pool.urlopen(
            "POST",
            path,
            body=body,
            headers=headers,
            redirect=False,
            retries=False,
            preload_content=False,
            assert_same_host=False,
        )
        status = response.status
        response.release_conn()
        return status
    finally:
        pool.close()


def deliveries_prune(*, now: datetime | None = None) -> int:
    """Delete delivered and failed deliveries older than ATLAS_WEBHOOK_RETENTION_DAYS; how
    many. Pending ones stay whatever their age: they are still owed."""
    now = now or timezone.now()
    before = now - timedelta(days=settings.ATLAS_WEBHOOK_RETENTION_DAYS)
    deleted, _ = (
        Delivery.objects.exclude(status=DeliveryStatus.PENDING)
        .filter(created_at__lt=before)
        .delete()
    )
    return deleted
