"""Celery tasks of the integrations: thin adapters over services, idempotent, ids only."""

from __future__ import annotations

import requests
from celery import shared_task
from django.db import transaction

from core.tasks import enqueue, retry_policy

from .services.alertmanager import alertmanager_push
from .services.webhooks import (
    deliveries_due,
    deliveries_prune,
    delivery_attempt,
    webhook_outbox_scan,
)


@shared_task(
    acks_late=True,
    **retry_policy(requests.RequestException),
    time_limit=120,
    soft_time_limit=100,
)
def push_alerts() -> int:
    """Beat: every open finding to Alertmanager, and those resolved since the last run."""
    return alertmanager_push()


@shared_task(acks_late=True, **retry_policy())
def scan_webhook_outbox() -> int:
    """Beat: deliveries for findings raised or resolved since the last scan, sent at once."""
    due = webhook_outbox_scan()
    transaction.on_commit(_enqueue_due)
    return due


@shared_task(acks_late=True)
def send_due_deliveries() -> int:
    """Beat: enqueue the deliveries whose next attempt (after a failure) is due."""
    return _enqueue_due()


@shared_task(acks_late=True, time_limit=120, soft_time_limit=100)
def send_delivery(delivery_id: int) -> str:
    """One attempt of one delivery (a duplicate enqueue is a no-op: the attempt is leased)."""
    return delivery_attempt(delivery_id=delivery_id)


@shared_task(acks_late=True, time_limit=600, soft_time_limit=570)
def prune_deliveries() -> int:
    """Beat, hourly: forget old delivered and failed deliveries."""
    return deliveries_prune()


def _enqueue_due() -> int:
    due = deliveries_due()
    for delivery_id in due:
        enqueue(send_delivery, delivery_id)
    return len(due)
