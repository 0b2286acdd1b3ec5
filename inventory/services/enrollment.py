"""Enrollment: one secret for a whole fleet, traded once per server for its own agent token.

Staff create an enrollment token (`cae_...`, stored as a SHA-256 like every token) allowed
`uses` enrollments until it expires or is revoked. An agent presents it with its identity
(hostname, system UUID, machine-id, the scheduler node names it knows) and gets an agent
token already bound to the server that identity names (`inventory.identity`'s rule), so
the NodeRestriction-like confinement of `ingest._authorise` holds from its first report.

All of it is one transaction that locks the enrollment token's row, then the server's:
agents racing with one token are counted one by one, and two agents claiming one identity
get one server and one live agent token. A refusal raises before anything is written, or
rolls back what was, so it changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from ..identity import normalize_machine_id, normalize_uuid, server_identity
from ..models import AgentToken, Enrollment, EnrollmentToken, Server
from .apply import _lock_server
from .heartbeat_memory import heartbeat_forget
from .tokens import PREFIX_SHOWN, _new_key, _usable, agent_token_create, token_digest

ENROLLMENT_TOKEN_PREFIX = "cae_"
DEFAULT_EXPIRES_IN = timedelta(days=7)
_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

UNKNOWN = "Unknown enrollment token."
NOT_AN_ENROLLMENT_TOKEN = (
    "Not an enrollment token: agent and API tokens cannot enroll (create one with "
    "`manage.py createenrollmenttoken`)."
)


class EnrollmentRefused(Exception):
    """An enrollment refused: 401 (unknown, forged, another kind of token), 403 (spent,
    expired, revoked) or 409 (the server already has a live agent token)."""

    def __init__(self, status_code: int, detail: str) -> None:
        super().__init__(detail)
        self.status_code = status_code
        self.detail = detail


@dataclass(frozen=True)
class EnrollmentIdentity:
    """What an agent says it is; node names are "" when it does not know them."""

    hostname: str
    system_uuid: str = ""
    machine_id: str = ""
    kubernetes_node_name: str = ""
    slurm_node_name: str = ""

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> EnrollmentIdentity:
        return cls(**{name: str(data.get(name) or "") for name in cls.__dataclass_fields__})

    def host(self) -> dict[str, str]:
        return {
            "hostname": self.hostname,
            "system_uuid": self.system_uuid,
            "machine_id": self.machine_id,
        }


def parse_duration(text: str) -> timedelta:
    """`30m`, `12h`, `7d`, `2w` (one number, one unit); ValueError otherwise."""
    match = _DURATION.match(text or "")
    if not match or int(match[1]) == 0:
        raise ValueError(f"{text!r} is not a duration such as 30m, 12h, 7d or 2w")
    return timedelta(**{_UNITS[match[2]]: int(match[1])})


def enrollment_token_create(
    *,
    name: str = "",
    uses: int = 1,
    expires_in: timedelta | None = DEFAULT_EXPIRES_IN,
    allow_reenroll: bool = False,
    created_by: Any = None,
) -> tuple[EnrollmentToken, str]:
    """Create a token; returns the row and the key, which is never retrievable again.
    `expires_in=None` never expires (revoke it when the rollout is done)."""
    if uses < 1:
        raise ValueError("an enrollment token allows at least one use")
    key = _new_key(ENROLLMENT_TOKEN_PREFIX)
    now = timezone.now()
    token = EnrollmentToken.objects.create(
        name=name,
        key_hash=token_digest(key),
        prefix=key[:PREFIX_SHOWN],
        created_by=created_by,
        created_at=now,
        expires_at=None if expires_in is None else now + expires_in,
        uses_allowed=uses,
        allow_reenroll=allow_reenroll,
    )
    return token, key


def enrollment_token_revoke(*, token: EnrollmentToken) -> None:
    """Refuse every later enrollment; agent tokens it issued stay valid (revoke those apart)."""
    EnrollmentToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    token.refresh_from_db(fields=["revoked_at"])


def enrollment_token_state(token: EnrollmentToken, now: datetime | None = None) -> str:
    """ "active", "revoked", "expired" or "spent" (the first that applies, in that order)."""
    now = now or timezone.now()
    if token.revoked_at is not None:
        return "revoked"
    if token.expires_at is not None and token.expires_at <= now:
        return "expired"
    if token.uses >= token.uses_allowed:
        return "spent"
    return "active"


def agent_enroll(
    *, key: str, identity: EnrollmentIdentity, remote_addr: str | None = None
) -> tuple[str, Server]:
    """Trade an enrollment token and a server's identity for an agent token bound to it.

    Returns the agent token's key (shown once) and the server (created when the identity
    names none). Raises EnrollmentRefused, having changed nothing.
    """
    if not key.startswith(ENROLLMENT_TOKEN_PREFIX):
        raise EnrollmentRefused(401, NOT_AN_ENROLLMENT_TOKEN if _usable(key) else UNKNOWN)
    if not _usable(key):
        raise EnrollmentRefused(401, UNKNOWN)
    host = identity.host()
    claimed = server_identity(host)
    with transaction.atomic():
        locked = EnrollmentToken.objects.select_for_update().filter(key_hash=token_digest(key))
        token = locked.first()
        if token is None:
            raise EnrollmentRefused(401, UNKNOWN)
        now = timezone.now()
        state = enrollment_token_state(token, now)
        if state != "active":
            raise EnrollmentRefused(403, f"This enrollment token is {state}.")
        server, _created = _lock_server(claimed, host, now)
        bound = list(AgentToken.objects.select_for_update().filter(identity=claimed))
        live = [t for t in bound if t.revoked_at is None]
        if live and not token.allow_reenroll:
            raise EnrollmentRefused(
                409,
                f"{identity.hostname} is already enrolled with a live agent token; staff can "
                "revoke it or enroll with a token that allows re-enrollment",
            )
        # A reinstall: the old tokens are revoked and let go of the identity (it is unique).
        AgentToken.objects.filter(pk__in=[t.pk for t in bound]).update(
            identity=None, revoked_at=Coalesce(F("revoked_at"), now)
        )
        # Forgotten once revoked for all to see: before the commit, a heartbeat in this
        # process could remember the old token again; a rollback forgets nothing.
        transaction.on_commit(partial(heartbeat_forget, *(t.key_hash for t in bound)))
        agent_token, agent_key = agent_token_create(name=f"enrolled: {identity.hostname}"[:200])
        try:
            with transaction.atomic():
                AgentToken.objects.filter(pk=agent_token.pk).update(
                    identity=claimed, server=server, last_used_at=now
                )
        except IntegrityError:  # another transaction bound it meanwhile without our locks
            raise EnrollmentRefused(409, f"{identity.hostname} was enrolled meanwhile") from None
        EnrollmentToken.objects.filter(pk=token.pk).update(uses=F("uses") + 1)
        Enrollment.objects.create(
            token=token,
            server=server,
            agent_token=agent_token,
            identity=claimed,
            hostname=identity.hostname,
            system_uuid=normalize_uuid(identity.system_uuid) or "",
            machine_id=normalize_machine_id(identity.machine_id) or "",
            kubernetes_node_name=identity.kubernetes_node_name,
            slurm_node_name=identity.slurm_node_name,
            remote_addr=remote_addr,
            replaced_token=bool(live),
            enrolled_at=now,
        )
    return agent_key, server
