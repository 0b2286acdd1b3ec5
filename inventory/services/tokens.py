"""Agent tokens: created by admins, shown once, stored only as a SHA-256 digest."""

from __future__ import annotations

import hashlib
import secrets

from django.utils import timezone

from ..models import AgentToken

TOKEN_PREFIX = "caa_"  # recognisable in secret scanners and logs


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def agent_token_create(*, name: str = "") -> tuple[AgentToken, str]:
    """Create a token; returns the row and the key, which is never retrievable again."""
    key = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = AgentToken.objects.create(name=name, key_hash=_digest(key), prefix=key[:10])
    return token, key


def agent_token_authenticate(key: str) -> AgentToken | None:
    """The live token for a key, with its bound server, in one query; None if unknown/revoked."""
    if not key or len(key) > 200:
        return None
    token = (
        AgentToken.objects.select_related("server")
        .filter(key_hash=_digest(key), revoked_at__isnull=True)
        .first()
    )
    return token


def agent_token_unbind(*, token: AgentToken) -> None:
    """Admin action: let the token claim a server again (after a re-install or a swap)."""
    token.identity = None
    token.server = None
    token.save(update_fields=["identity", "server"])


def agent_token_revoke(*, token: AgentToken) -> None:
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
