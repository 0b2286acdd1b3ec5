"""Receiving an agent report: size, JSON, schema, token binding, storage, enqueue.

The heartbeat path (a report identical to the last one applied for the token's server)
costs one UPDATE after authentication: no schema validation, no stored row, no task.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.safe_input import InputRejected, json_loads

from ..choices import ReportStatus
from ..identity import server_identity
from ..models import AgentToken, Report, Server
from ..validation import report_errors

logger = logging.getLogger(__name__)

# Not facts about the server: `events` are new each time (stored once each by health), so a
# report carrying some is never a heartbeat, and the next one without them is one again.
VOLATILE_KEYS = ("collected_at", "events")


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


def content_hash(payload: dict[str, Any]) -> str:
    """SHA-256 of the report without its volatile fields, keys sorted: equal facts, equal hash."""
    facts = {k: v for k, v in payload.items() if k not in VOLATILE_KEYS}
    canonical = json.dumps(facts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def report_receive(
    *, token: AgentToken, body: bytes, enqueue: Callable[[int], None] | None = None
) -> ReceiveResult:
    """Validate, authorise and store one report; enqueue its application after commit.

    Raises ReportRejected (413 too large, 400 malformed, 403 another server's identity).
    `enqueue` is called with the report id once the transaction commits; when it fails (the
    broker is away) the report stays pending and the periodic sweep applies it.
    """
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
    if heartbeat and server is not None and token.identity and not payload.get("events"):
        # Heartbeat: the same facts as the last applied report of this token's server.
        Server.objects.filter(pk=server.pk).update(last_seen=timezone.now())
        return ReceiveResult(
            report_id=server.last_report_id, status="unchanged", server_id=server.pk
        )

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
            report_id = report.pk
            transaction.on_commit(lambda: _safe_enqueue(enqueue, report_id))
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


def _safe_enqueue(enqueue: Callable[[int], None], report_id: int) -> None:
    try:
        enqueue(report_id)
    except Exception as exc:  # the broker is away: the sweep applies pending reports
        logger.warning(
            "could not enqueue report %s (%s); it stays pending for the sweep",
            report_id,
            type(exc).__name__,
        )
