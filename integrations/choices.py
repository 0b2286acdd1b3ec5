"""Enumerations of the integrations layer."""

from django.db import models


class WebhookEvent(models.TextChoices):
    FINDING_RAISED = "finding.raised", "A finding was raised (or reopened)"
    FINDING_RESOLVED = "finding.resolved", "A finding was resolved"
    HEALTH_EVENT = "health.event", "A GPU health event (reserved; not sent yet)"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"  # not sent yet, or waiting for its next attempt
    DELIVERED = "delivered", "Delivered"  # the receiver answered 2xx
    FAILED = "failed", "Failed"  # gave up: the retry window passed or the receiver said 4xx


class ReportOutcome(models.TextChoices):
    """What the reports endpoint answered an agent; `rejected` carries the HTTP status."""

    PENDING = "pending", "Stored, to be applied"
    UNCHANGED = "unchanged", "Unchanged (heartbeat)"
    APPLIED = "applied", "Applied at once"
    ACCEPTED = "accepted", "Accepted (other)"
    REJECTED = "rejected", "Rejected"
