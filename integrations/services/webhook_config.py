"""People's writes of webhooks (the pages; the API saves through its serializer): register a
receiver, change it, remove it. The secret is stored to sign bodies and never read back out."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.conf import settings
from django.db import transaction

from ..destinations import DestinationRefused, allowed_networks, destination_check
from ..models import Webhook

logger = logging.getLogger(__name__)


def webhook_url_refusal(url: str) -> str | None:
    """Why `url` may not be saved as a receiver, or None. A name that does not resolve is
    refused too: it cannot be checked, and a typo is better told now than after a day of
    retries."""
    try:
        destination_check(url, allowed=allowed_networks(settings.ATLAS_WEBHOOK_ALLOWED_NETWORKS))
    except DestinationRefused as exc:
        return str(exc)
    return None


def webhook_create(
    *, url: str, secret: str, events: Iterable[str], active: bool, description: str, user
) -> Webhook:
    """A new receiver of the `events` (kept sorted, once each); it gets events from now on."""
    webhook = Webhook.objects.create(
        url=url,
        secret=secret,
        events=sorted(set(events)),
        active=active,
        description=description,
        created_by=user,
    )
    logger.info("webhook %s to %s created by %s", webhook.pk, url, user.get_username())
    return webhook


def webhook_update(
    *,
    webhook: Webhook,
    url: str,
    events: Iterable[str],
    active: bool,
    description: str,
    user,
    secret: str = "",
) -> Webhook:
    """Change a receiver; its secret stays unless a new one is given. Turning it on clears
    why it was disabled."""
    webhook.url, webhook.events = url, sorted(set(events))
    webhook.active, webhook.description = active, description
    fields = ["url", "events", "active", "description"]
    if active and webhook.disabled_at is not None:
        webhook.disabled_at, webhook.disabled_reason = None, ""
        fields += ["disabled_at", "disabled_reason"]
    if secret:
        webhook.secret = secret
        fields.append("secret")
    webhook.save(update_fields=fields)
    logger.info(
        "webhook %s changed by %s%s",
        webhook.pk,
        user.get_username(),
        " (new secret)" if secret else "",
    )
    return webhook


def webhook_delete(*, webhook: Webhook, user) -> None:
    """Remove a receiver and its deliveries (pending ones are never sent)."""
    with transaction.atomic():
        pk = webhook.pk
        webhook.delete()
    logger.info("webhook %s deleted by %s", pk, user.get_username())
