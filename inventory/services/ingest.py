"""Receiving an agent report: size, JSON, schema, token binding, storage, enqueue.

The heartbeat path (a report whose facts equal the last applied report of the token's
server) is compared by digest before any validation: no stored row, no task. Cheaper still,
an agent that names its digest in the `X-Atlas-Report-Digest` header is answered without
the body being read. Ahead of the middleware both are one statement, or none while the web
process remembers the token's hit (`heartbeat.py`); here,
after DRF authenticated the token, one UPDATE.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.db.models.sql import UpdateQuery
from django.utils import timezone

from agent.schema import DIGEST_SCHEME, VOLATILE_KEYS, report_digest
from core.safe_input import InputRejected, json_loads
from core.tasks import send_or_log

from ..choices import ReportStatus
from ..identity import server_identity
from ..models import AgentToken, Report, Server
from ..validation import report_errors
from .heartbeat_memory import heartbeat_forget
from .tokens import AgentTokenState

logger = logging.getLogger(__name__)

# The digest of a report's facts, stored as Report.content_hash and Server.last_report_hash;
# one definition with the agent's (agent/schema.py), which sends it ahead of a report.
content_hash = report_digest
_HEX = frozenset("0123456789abcdef")


class ReportRejected(Exception):
    """A report the backend will not store; status_code is the HTTP answer."""

    def __init__(self, status_code: int, errors: dict[str, list[str]]) -> None:
        super().__init__(status_code, errors)
        self.status_code = status_code
        self.errors = errors


@dataclass(frozen=True)
class ReceiveResult:
    report_id: int | None
    status: str  # "pending": stored, to be applied; "unchanged": heartbeat only
    server_id: int | None = None


class DigestRejected(ValueError):
    """An `X-Atlas-Report-Digest` header that is not `sha256:<64 lower-case hex digits>`."""


def parse_digest(header: str) -> str:
    """The hex digest from the header's value; DigestRejected (a 400) for anything else."""
    value = header.strip()
    hex_digest = value[len(DIGEST_SCHEME) :].lower()
    if (
        not value.lower().startswith(DIGEST_SCHEME)
        or len(hex_digest) != 64
        or not _HEX.issuperset(hex_digest)
    ):
        raise DigestRejected(f"expected {DIGEST_SCHEME}<64 hex digits>")
    return hex_digest


def heartbeat_by_digest(*, state: AgentTokenState, digest: str) -> ReceiveResult | None:
    """The agent's digest equals the last applied report's: mark the server seen (one UPDATE)
    without reading the report. None when it differs, or the token has no server yet: then
    the agent must send the report itself."""
    if not _heartbeat_possible(state) or digest != state.last_report_hash:
        return None
    return _mark_seen(state)


def heartbeat_receive(*, state: AgentTokenState, body: bytes) -> ReceiveResult | None:
    """The heartbeat path, before any validation: the body's facts hash to the last applied
    report's digest and it carries no events, so the server is only marked seen. None
    whenever that is not certain (see heartbeat_digest): report_receive then decides."""
    if not _heartbeat_possible(state):
        return None
    digest = heartbeat_digest(body)
    if digest is None or digest != state.last_report_hash:
        return None
    return _mark_seen(state)


def heartbeat_digest(body: bytes) -> str | None:
    """The digest of a report body that may be a heartbeat, parsed once and hashed once; None
    whenever it cannot be (events, a body the strict decoder might refuse, over the limit).

    Certain means a heartbeat answers exactly what report_receive would: its facts then equal
    ones validated when first applied, and the volatile keys are plain values the strict
    decoder accepts. No query: the middleware runs it before the token is looked up (a cost
    bounded by ATLAS_REPORT_MAX_BYTES, as reading the body is).
    """
    if len(body) > settings.ATLAS_REPORT_MAX_BYTES:
        return None
    try:
        payload = json.loads(body.decode("utf-8"), parse_constant=_not_a_number)
        if not isinstance(payload, dict) or payload.get("events"):
            return None
        if not _plain(payload.get("collected_at")):
            return None
        return report_digest(payload)
    except (ValueError, RecursionError, TypeError):  # UTF-8, JSON, NaN, surrogates, depth
        return None


def _heartbeat_possible(state: AgentTokenState) -> bool:
    return bool(state.identity) and state.server_id is not None and bool(state.last_report_hash)


def _mark_seen(state: AgentTokenState) -> ReceiveResult:
    """One UPDATE of the server's last_seen, its SQL written once (see agent_token_state)."""
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(_seen_sql(connection.vendor), [now, state.server_id])
    return ReceiveResult(
        report_id=state.last_report_id, status="unchanged", server_id=state.server_id
    )


@cache
def _seen_sql(vendor: str) -> str:
    query = UpdateQuery(Server)
    query.add_update_values({"last_seen": timezone.now()})
    query.add_q(Q(pk=0))
    sql, params = query.get_compiler(connection=connection).as_sql()
    assert len(params) == 2, params  # last_seen, then the server's id
    return sql


def _not_a_number(name: str) -> Any:
    raise ValueError(name)


def _plain(value: Any) -> bool:
    """A value the strict decoder takes as it is: no string with NUL or a lone surrogate, no
    float beyond a double (decoded as infinity)."""
    if value is None or isinstance(value, bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return "\x00" not in value and (value.isascii() or _encodable(value))
    return False


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def report_receive(
    *, token: AgentToken, body: bytes, enqueue: Callable[[int], object] | None = None
) -> ReceiveResult:
    """Validate, authorise and store one report; enqueue its application after commit.

    Raises ReportRejected (413 too large, 400 malformed, 403 another server's identity).
    `enqueue` is called with the report id once the transaction commits; when it fails (the
    broker is away) the report stays pending and the periodic sweep applies it.
    """
    state = AgentTokenState.of(token)
    quick = heartbeat_receive(state=state, body=body)
    if quick is not None:
        return quick
    if len(body) > settings.ATLAS_REPORT_MAX_BYTES:
        raise ReportRejected(
            413,
            {
                "body": [
                    f"report is {len(body)} bytes; the limit is {settings.ATLAS_REPORT_MAX_BYTES}"
                ]
            },
        )
    try:
        payload = json_loads(body)
    except InputRejected as exc:
        raise ReportRejected(400, exc.errors) from None
    if not isinstance(payload, dict):
        raise ReportRejected(400, {"body": ["a report is a JSON object"]})

    digest = content_hash(payload)
    server = token.server
    heartbeat = server is not None and server.last_report_hash == digest
    if heartbeat and token.identity and not payload.get("events"):
        # Heartbeat: the same facts as the last applied report of this token's server (a
        # body heartbeat_receive left to the strict decoder, such as one with a BOM).
        return _mark_seen(state)

    # The facts of the last applied report and new events: nothing to apply. It is stored as
    # applied (the health layer reads its events from there); only its new parts need checks.
    unchanged = heartbeat and bool(token.identity)
    errors = report_errors(_new_parts(payload) if unchanged else payload)
    if errors:
        raise ReportRejected(400, errors)
    identity = server_identity(payload["host"])

    with transaction.atomic():
        _authorise(token=token, identity=identity)
        now = timezone.now()
        report = Report.objects.create(
            token=token,
            identity=identity,
            payload=payload,
            content_hash=digest,
            size_bytes=len(body),
            **(
                {"status": ReportStatus.APPLIED, "server": server, "applied_at": now}
                if unchanged
                else {}
            ),
        )
        if unchanged and server is not None:
            Server.objects.filter(pk=server.pk).update(last_seen=now, last_report=report)
        if enqueue is not None:  # an applied report's task is a no-op that still says so
            transaction.on_commit(
                partial(
                    send_or_log,
                    partial(enqueue, report.pk),
                    what=f"report {report.pk}",
                    then="it stays pending for the sweep",
                )
            )

    heartbeat_forget(token.key_hash)  # this process asks the statement about its next one
    status = ReportStatus.APPLIED if unchanged else ReportStatus.PENDING
    return ReceiveResult(report_id=report.pk, status=status, server_id=token.server_id)


def _new_parts(payload: dict[str, Any]) -> dict[str, Any]:
    """A report whose digest equals the last applied one's adds only its volatile keys to
    facts validated then: those, in a shell that is valid by itself, are what to validate."""
    shell = {"schema": payload.get("schema"), "agent": payload.get("agent")}
    shell.update({"host": {"hostname": "-"}, "gpus": []})
    return {**shell, **{key: payload[key] for key in VOLATILE_KEYS if key in payload}}


def _authorise(*, token: AgentToken, identity: str) -> None:
    """A token writes only the server it first reported (like Kubernetes' NodeRestriction)."""
    if token.identity:
        if token.identity != identity:
            raise ReportRejected(
                403,
                {"host": ["this agent token is bound to another server; an admin can re-bind it"]},
            )
        return
    if AgentToken.objects.filter(identity=identity).exclude(pk=token.pk).exists():
        raise ReportRejected(
            403, {"host": ["this server is bound to another agent token; an admin can re-bind it"]}
        )
    try:
        with transaction.atomic():
            AgentToken.objects.filter(pk=token.pk).update(
                identity=identity, last_used_at=timezone.now()
            )
    except IntegrityError:
        raise ReportRejected(
            403, {"host": ["this server is bound to another agent token; an admin can re-bind it"]}
        ) from None
    token.identity = identity
