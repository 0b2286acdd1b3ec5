"""What the integrations keep: report outcome counters, scan watermarks, webhooks, deliveries."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from findings.models import Finding

from .choices import DeliveryStatus, ReportOutcome, WebhookEvent


class ReportOutcomeCount(models.Model):
    """How many agent reports got each answer, since the database was created.

    A counter in the database, not in a process, so every gunicorn worker's scrape agrees.
    Counted only while metrics are on (ATLAS_METRICS_TOKEN set).
    """

    outcome = models.CharField(max_length=16, choices=ReportOutcome.choices)
    status_code = models.PositiveSmallIntegerField()
    count = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["outcome", "status_code"], name="report_outcome_count_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.outcome} {self.status_code}: {self.count}"


class Watermark(models.Model):
    """Up to when a periodic scan (Alertmanager push, webhook outbox) has read findings."""

    name = models.CharField(max_length=32, primary_key=True)
    at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} at {self.at:%Y-%m-%d %H:%M:%S}"


class Webhook(models.Model):
    """A receiver of signed JSON POSTs. The secret signs bodies; it is never shown again."""

    url = models.URLField(max_length=1000)
    secret = models.CharField(max_length=200, editable=False)
    events = models.JSONField(default=list)
    active = models.BooleanField(default=True)
    description = models.CharField(max_length=200, blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    # Set (and `active` cleared) when it failed for a whole retry window or its URL came to
    # resolve inside the network; staff turning it back on clears them.
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=500, blank=True, default="")
    # Pending deliveries dropped, oldest first, to keep at most ATLAS_WEBHOOK_MAX_PENDING.
    dropped_deliveries = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"webhook {self.pk} to {self.url}"

    def __repr__(self) -> str:  # never the secret
        return f"<Webhook {self.pk} {self.url}>"


class Delivery(models.Model):
    """One event for one webhook: created by the outbox scan, sent (and retried) by a task.

    Unique per (webhook, event, finding, occurrence): `occurrence` is the finding's
    reopened_count, so a finding that returns is announced again, and a rescan never twice.
    """

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=32, choices=WebhookEvent.choices)
    finding = models.ForeignKey(
        Finding, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    occurrence = models.PositiveIntegerField(default=0)
    payload = models.JSONField()
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["webhook", "event", "finding", "occurrence"], name="delivery_once"
            )
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"])]
        verbose_name_plural = "deliveries"

    def __str__(self) -> str:
        return f"delivery {self.pk} ({self.event}, {self.status})"
