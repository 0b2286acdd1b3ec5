"""API tokens, for agents and for people: created by admins, shown once, stored as SHA-256.

One mechanism for both kinds: a random key with a recognisable prefix (`caa_` for an agent,
`cau_` for a person, so secret scanners and a glance at a log tell them apart), of which
only the digest and the first characters are kept. A key therefore cannot be read back
from the database, the admin or a backup; a lost key is revoked and a new one created.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from functools import cache

from django.db import connection
from django.utils import timezone

from ..models import AgentToken, UserToken
from .heartbeat_memory import heartbeat_forget

TOKEN_PREFIX = "caa_"  # an agent's key
USER_TOKEN_PREFIX = "cau_"  # a person's (or a script's) key
PREFIX_SHOWN = 10  # characters kept in clear: the kind and 36 bits of the key
MAX_KEY_LENGTH = 200
# A person's token records its last use at most this often: no write on every API call.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def token_digest(key: str) -> str:
    """The stored form of a key (hex SHA-256): the key itself is random, so no salt is needed."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _new_key(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def _usable(key: str) -> bool:
    return bool(key) and len(key) <= MAX_KEY_LENGTH


def agent_token_create(*, name: str = "") -> tuple[AgentToken, str]:
    """Create a token; returns the row and the key, which is never retrievable again."""
    key = _new_key(TOKEN_PREFIX)
    token = AgentToken.objects.create(
        name=name, key_hash=token_digest(key), prefix=key[:PREFIX_SHOWN]
    )
    return token, key


def agent_token_authenticate(key: str) -> AgentToken | None:
    """The live token for a key, with its bound server's last applied report (id and digest),
    in one indexed query; None if unknown or revoked."""
    if not _usable(key):
        return None
    return (
        AgentToken.objects.select_related("server")
        .only(*_AGENT_TOKEN_FIELDS)
        .filter(key_hash=token_digest(key), revoked_at__isnull=True)
        .first()
    )


# The token's own columns and what a heartbeat compares: not the server's forty others,
# which cost more to select and build than the lookup itself.
_AGENT_TOKEN_FIELDS = (
    "name",
    "prefix",
    "identity",
    "server",
    "created_at",
    "last_used_at",
    "revoked_at",
    "server__last_report_hash",
    "server__last_report",
)


@dataclass(frozen=True)
class AgentTokenState:
    """What a heartbeat needs of a live agent token: its binding and the digest of the last
    report applied for its server ("" when none, or when that server's facts changed since)."""

    token_id: int
    identity: str | None
    server_id: int | None
    last_report_id: int | None
    last_report_hash: str

    @classmethod
    def of(cls, token: AgentToken) -> AgentTokenState:
        server = token.server
        return cls(
            token_id=token.pk,
            identity=token.identity,
            server_id=token.server_id,
            last_report_id=server.last_report_id if server is not None else None,
            last_report_hash=server.last_report_hash if server is not None else "",
        )


def agent_token_state(key: str) -> AgentTokenState | None:
    """The heartbeat's view of the live token for a key: one indexed query whose SQL is
    compiled once per process (building an ORM query costs more than running it); None if
    unknown or revoked."""
    if not _usable(key):
        return None
    with connection.cursor() as cursor:
        cursor.execute(_state_sql(connection.vendor), [token_digest(key)])
        row = cursor.fetchone()
    if row is None:
        return None
    token_id, identity, server_id, last_report_id, last_report_hash = row
    return AgentTokenState(
        token_id=token_id,
        identity=identity,
        server_id=server_id,
        last_report_id=last_report_id,
        last_report_hash=last_report_hash or "",
    )


@cache
def _state_sql(vendor: str) -> str:
    query = (
        AgentToken.objects.filter(key_hash="", revoked_at__isnull=True)
        .order_by()
        .values_list(
            "pk", "identity", "server_id", "server__last_report_id", "server__last_report_hash"
        )[:1]
        .query
    )
    sql, params = query.sql_with_params()
    assert params == ("",), params  # the key hash is the only parameter
    return sql


def agent_token_unbind(*, token: AgentToken) -> None:
    """Admin action: let the token claim a server again (after a re-install or a swap)."""
    token.identity = None
    token.server = None
    token.save(update_fields=["identity", "server"])
    heartbeat_forget(token.key_hash)


def agent_token_revoke(*, token: AgentToken) -> None:
    """Refused at once by this process; by the other web processes within
    ATLAS_HEARTBEAT_CACHE_S (the heartbeats they answer from memory: heartbeat.py)."""
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    heartbeat_forget(token.key_hash)


def user_token_create(*, user, name: str = "") -> tuple[UserToken, str]:
    """A person's API token; returns the row and the key, which is never retrievable again."""
    key = _new_key(USER_TOKEN_PREFIX)
    token = UserToken.objects.create(
        user=user, name=name, key_hash=token_digest(key), prefix=key[:PREFIX_SHOWN]
    )
    return token, key


def user_token_authenticate(key: str) -> UserToken | None:
    """The live token for a key, with its user, in one query; None if unknown or revoked.

    Whether the user may still sign in (is_active) is the caller's decision, as for a session.
    """
    if not _usable(key):
        return None
    token = (
        UserToken.objects.select_related("user")
        .filter(key_hash=token_digest(key), revoked_at__isnull=True)
        .first()
    )
    if token is not None:
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
            UserToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
    return token


def user_token_revoke(*, token: UserToken) -> None:
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
