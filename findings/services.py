"""Writes of findings: the one writer every family's pass calls, and a person's
acknowledgement and silence.

Reconciliation (clusters/), the health rules (health/) and the fabric rules (fabric/) each
return `FindingFact`s and hand the ones they want open to `findings_write` with their family;
it turns them into rows (raise, reopen, update, resolve).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from .choices import FindingType, family_q
from .facts import FindingFact
from .models import Finding

logger = logging.getLogger(__name__)

BATCH = 2000


def findings_write(
    *,
    desired: Mapping[tuple[str, str], FindingFact],
    now: datetime,
    family: str,
    scope: Q | None = None,
) -> tuple[int, int, int]:
    """Raise new findings, reopen returned ones, resolve the ones whose cause is gone.

    A pass answers for its `family`'s findings only: those are the ones it may resolve, so no
    writer resolves another's findings. `scope` narrows that further for a pass that judged
    less (one fabric, a few servers). Every desired fact must be of the family (ValueError
    otherwise: a fact outside it would be raised and never resolved). Returns (raised,
    resolved, open in scope).
    """
    types = FindingType.of_family(family)
    if not types:
        raise ValueError(f"no finding family {family!r}")
    strays = sorted({fact.type for fact in desired.values()} - set(types))
    if strays:
        raise ValueError(f"not {family} findings: {', '.join(strays)}")
    findings = Finding.objects.filter(family_q(family))
    if scope is not None:
        findings = findings.filter(scope)
    existing = {
        (row[0], row[1]): row[2:]
        for row in findings.values_list(
            "type",
            "subject",
            "id",
            "resolved_at",
            "reopened_count",
            "message",
            "severity",
            "server_id",
            "node_id",
            "cluster_id",
            "gpu_id",
            "action",
        )
    }
    upserts, raised = [], 0
    for key, d in desired.items():
        old = existing.get(key)
        reopened = 0
        if old is not None:
            _id, resolved_at, reopened, *current = old
            unchanged = tuple(current) == (
                d.message,
                d.severity,
                d.server_id,
                d.node_id,
                d.cluster_id,
                d.gpu_id,
                d.action,
            )
            if resolved_at is None and unchanged:
                continue
            if resolved_at is not None:
                reopened += 1
                raised += 1
        else:
            raised += 1
        upserts.append(
            Finding(
                type=d.type,
                severity=d.severity,
                subject=d.subject,
                message=d.message,
                details=d.details,
                server_id=d.server_id,
                node_id=d.node_id,
                cluster_id=d.cluster_id,
                gpu_id=d.gpu_id,
                action=d.action,
                first_seen=now,
                last_seen=now,
                resolved_at=None,
                reopened_count=reopened,
            )
        )
    Finding.objects.bulk_create(
        upserts,
        update_conflicts=True,
        unique_fields=["type", "subject"],
        update_fields=[
            "severity",
            "message",
            "details",
            "server",
            "node",
            "cluster",
            "gpu",
            "action",
            "last_seen",
            "resolved_at",
            "reopened_count",
        ],
        batch_size=BATCH,
    )
    gone = [row[0] for key, row in existing.items() if row[1] is None and key not in desired]
    resolved = 0
    for start in range(0, len(gone), BATCH):
        resolved += Finding.objects.filter(id__in=gone[start : start + BATCH]).update(
            resolved_at=now, last_seen=now
        )
    findings.filter(resolved_at__isnull=True).exclude(last_seen=now).update(last_seen=now)
    return raised, resolved, len(desired)


SILENCE_MAX = timedelta(days=90)
REASON_MAX: int = Finding._meta.get_field("ack_reason").max_length  # type: ignore[assignment]
"""What `Finding.ack_reason` and `silence_reason` hold."""


class FindingActionRejected(Exception):
    """A person's acknowledgement or silence that cannot be taken; `errors` maps fields."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__(next(iter(errors.values()))[0])
        self.errors = errors


def silence_until_errors(*, until: datetime | None, now: datetime) -> list[str]:
    """Why `until` cannot end a silence: it must lie ahead, and at most SILENCE_MAX ahead (a
    silence nobody remembers must not hide a finding for ever)."""
    if until is None:
        return ["Say until when the finding stays silenced."]
    if until <= now:
        return ["A silence must end in the future."]
    if until > now + SILENCE_MAX:
        return [f"A silence lasts at most {SILENCE_MAX.days} days."]
    return []


def _reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise FindingActionRejected({"reason": ["Say why."]})
    if len(reason) > REASON_MAX:
        raise FindingActionRejected({"reason": [f"At most {REASON_MAX} characters."]})
    return reason


def finding_acknowledge(*, finding: Finding, user, reason: str) -> Finding:
    """A person says they are on it: recorded with who, why and when, for this occurrence
    (resolving the finding ends the acknowledgement; a reopened finding is unacknowledged)."""
    reason = _reason(reason)
    if not finding.is_open:
        raise FindingActionRejected({"finding": ["A resolved finding needs no acknowledgement."]})
    finding.ack_by, finding.ack_at, finding.ack_reason = user, timezone.now(), reason
    finding.ack_occurrence = finding.reopened_count
    finding.save(update_fields=["ack_by", "ack_at", "ack_reason", "ack_occurrence"])
    logger.info("finding %s acknowledged by %s", finding.pk, user.get_username())
    return finding


def finding_silence(*, finding: Finding, user, reason: str, until: datetime | None) -> Finding:
    """Hide a finding from the overview's counts and from alerting until `until`."""
    reason = _reason(reason)
    errors = silence_until_errors(until=until, now=timezone.now())
    if errors:
        raise FindingActionRejected({"until": errors})
    finding.silenced_by, finding.silenced_at = user, timezone.now()
    finding.silenced_until, finding.silence_reason = until, reason
    finding.save(update_fields=["silenced_by", "silenced_at", "silenced_until", "silence_reason"])
    logger.info("finding %s silenced by %s until %s", finding.pk, user.get_username(), until)
    return finding


def finding_unacknowledge(*, finding: Finding, user) -> Finding:
    """A person takes an acknowledgement back (nobody is on it after all): the finding is news
    again, and who took it back and when is recorded beside the acknowledgement's own record."""
    if not finding.acknowledged:
        raise FindingActionRejected({"finding": ["The finding is not acknowledged."]})
    finding.ack_occurrence = None
    finding.ack_withdrawn_by, finding.ack_withdrawn_at = user, timezone.now()
    finding.save(update_fields=["ack_occurrence", "ack_withdrawn_by", "ack_withdrawn_at"])
    logger.info("finding %s acknowledgement withdrawn by %s", finding.pk, user.get_username())
    return finding


def finding_unsilence(*, finding: Finding, user) -> Finding:
    """A person ends a silence early: the finding counts and alerts again from now; the silence
    ends now (its who and why are kept), with who lifted it and when."""
    now = timezone.now()
    if not finding.silenced(now):
        raise FindingActionRejected({"finding": ["The finding is not silenced."]})
    finding.silenced_until = now
    finding.silence_lifted_by, finding.silence_lifted_at = user, now
    finding.save(update_fields=["silenced_until", "silence_lifted_by", "silence_lifted_at"])
    logger.info("finding %s silence lifted by %s", finding.pk, user.get_username())
    return finding


BULK_MAX = 500
"""The most findings one bulk action takes (a page holds at most this many rows)."""


class BulkAction(models.TextChoices):
    """What a person may do to many findings at once (`findings_act`)."""

    ACKNOWLEDGE = "acknowledge", "Acknowledge"
    SILENCE = "silence", "Silence"
    UNACKNOWLEDGE = "unacknowledge", "Withdraw acknowledgement"


@dataclass(frozen=True)
class BulkOutcome:
    """What a bulk action did: the findings it changed, and why it left each other one."""

    done: list[int]
    skipped: dict[int, str]


def findings_act(
    *,
    finding_ids: Iterable[int],
    user,
    action: str,
    reason: str = "",
    until: datetime | None = None,
) -> BulkOutcome:
    """One person's action on many findings at once: eight identical warnings, one click.

    Each finding is acted on by the single action's own service (`finding_acknowledge`,
    `finding_silence`, `finding_unacknowledge`), so each is audited exactly as one acted on
    alone (who, when, why, and a log line), all in one transaction with the rows locked. The
    input is judged once before any row: a missing reason, a silence that ends in the past or
    too late, no ids or more than BULK_MAX raise `FindingActionRejected` and change nothing.
    A finding the action does not fit (resolved, not acknowledged, gone) is skipped and named
    in the outcome with why; the others are still done. Queries: one read (the rows, locked),
    then one UPDATE per finding changed.
    """
    try:
        act = BulkAction(action)
    except ValueError:
        raise FindingActionRejected({"action": [f"No bulk action {action!r}."]}) from None
    ids = sorted(set(finding_ids))
    if not ids:
        raise FindingActionRejected({"ids": ["Choose at least one finding."]})
    if len(ids) > BULK_MAX:
        raise FindingActionRejected({"ids": [f"At most {BULK_MAX} findings at once."]})
    kwargs: dict = {}
    if act in (BulkAction.ACKNOWLEDGE, BulkAction.SILENCE):
        kwargs["reason"] = _reason(reason)
    if act == BulkAction.SILENCE:
        errors = silence_until_errors(until=until, now=timezone.now())
        if errors:
            raise FindingActionRejected({"until": errors})
        kwargs["until"] = until
    services: dict[str, Callable[..., Finding]] = {
        BulkAction.ACKNOWLEDGE: finding_acknowledge,
        BulkAction.SILENCE: finding_silence,
        BulkAction.UNACKNOWLEDGE: finding_unacknowledge,
    }
    service = services[act]
    done: list[int] = []
    skipped: dict[int, str] = {}
    with transaction.atomic():
        findings = {f.pk: f for f in Finding.objects.select_for_update().filter(id__in=ids)}
        for finding_id in ids:
            finding = findings.get(finding_id)
            if finding is None:
                skipped[finding_id] = "No such finding."
                continue
            try:
                service(finding=finding, user=user, **kwargs)
            except FindingActionRejected as exc:
                skipped[finding_id] = str(exc)
            else:
                done.append(finding_id)
    logger.info(
        "bulk %s by %s: %d done, %d skipped",
        act.value,
        user.get_username(),
        len(done),
        len(skipped),
    )
    return BulkOutcome(done=done, skipped=skipped)
