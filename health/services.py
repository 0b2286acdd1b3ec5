"""Writes of the health layer: a report's events and GPU counters into history, the sweep that
feeds them in, and pruning.

Health sits above inventory, so inventory's report apply never calls in here. The sweep reads
what apply stored instead, the way reconciliation follows the inventory's revision: every few
seconds (and right after each apply where tasks run in-process) it records the reports applied
since its cursor, in id order, in batches of a fixed number of queries. The cursor stops before
the first report still pending, so a report applied late is never skipped; it moves in the
same transaction as the writes of its batch, so a crash repeats a batch whole or not at all.

Events are stored once: each report event has a fingerprint (the agent's key where the log
gives a position, else its content) remembered for ATLAS_HEALTH_RECEIPT_DAYS, so a batch the
agent re-sends after a failed delivery changes no count. Counters are kept as changes: a new
sample only when a counter moved or the GPU moved.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time as clock
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agent.schema import normalize_pci_bus_id
from core.batches import chunks
from findings.choices import Family, family_q
from findings.models import Finding
from findings.services import findings_write
from inventory.choices import ReportStatus
from inventory.models import Gpu, Report, Server

from .catalog import event_info
from .choices import EventKind
from .models import GpuCounterSample, HealthCursor, HealthEvent, HealthEventReceipt
from .rules import Policy, evaluate
from .selectors import health_findings, health_rule_inputs

logger = logging.getLogger(__name__)

CURSOR = "reports"
IN_CHUNK = 1000  # ids per IN (...) list
FUTURE_SLACK = timedelta(days=1)  # an event time further ahead than this is a wrong clock
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # and one before this too

# A change in any of these makes a new counter sample (history); the state fields only update
# the current sample (they move with load).
COUNTER_FIELDS = (
    "server_id",
    "pci_bus_id",
    "ecc_volatile_corrected",
    "ecc_volatile_uncorrected",
    "ecc_aggregate_corrected",
    "ecc_aggregate_uncorrected",
    "ecc_locations",
    "retired_pages_single_bit",
    "retired_pages_double_bit",
    "retired_pages_pending",
    "remapped_rows_correctable",
    "remapped_rows_uncorrectable",
    "remapped_rows_pending",
    "remapped_rows_failure",
    "pcie_link_gen_max",
    "pcie_link_width_current",
    "pcie_link_width_max",
    "pcie_replay_count",
    "nvlink_crc_errors",
    "nvlink_replay_errors",
    "nvlink_recovery_errors",
    "recovery_action",
)
STATE_FIELDS = ("pcie_link_gen_current", "performance_state", "clock_event_reasons")
# report GPU field -> sample field, for the counters that live beside `health`
_GPU_COUNTERS = {
    "ecc_errors_corrected": "ecc_aggregate_corrected",
    "ecc_errors_uncorrected": "ecc_aggregate_uncorrected",
    "retired_pages_pending": "retired_pages_pending",
    "remapped_rows_correctable": "remapped_rows_correctable",
    "remapped_rows_uncorrectable": "remapped_rows_uncorrectable",
    "remapped_rows_pending": "remapped_rows_pending",
    "remapped_rows_failure": "remapped_rows_failure",
}
_HEALTH_COUNTERS = tuple(
    f
    for f in (*COUNTER_FIELDS, *STATE_FIELDS)
    if f not in ("server_id", "pci_bus_id") and f not in _GPU_COUNTERS.values()
)


@dataclass(frozen=True)
class ReportHealth:
    """What health needs of one stored report."""

    report_id: int
    server_id: int
    received_at: datetime
    gpus: list[dict[str, Any]]
    events: list[dict[str, Any]]
    counters: bool = True  # False for a superseded report: its counters are older than applied
    applied_at: datetime | None = None  # counter samples carry the inventory's time of the facts

    @property
    def taken_at(self) -> datetime:
        return self.applied_at or self.received_at

    def names(self, uuid: str) -> bool:
        """Whether the report lists that GPU among its own (apply then took it as its)."""
        return any(gpu.get("uuid") == uuid for gpu in self.gpus)


@dataclass
class RecordResult:
    reports: int = 0
    episodes_created: int = 0
    episodes_extended: int = 0
    duplicates: int = 0
    samples: int = 0


@dataclass
class _GpuRow:
    id: int
    uuid: str
    serial: str
    server_id: int
    pci_bus_id: str


@dataclass
class _GpuIndex:
    by_uuid: dict[str, _GpuRow] = field(default_factory=dict)
    by_slot: dict[tuple[int, str], _GpuRow] = field(default_factory=dict)


# -- entry points ----------------------------------------------------------------------------


def health_record(*, server: Server, report: Report) -> RecordResult:
    """Record one applied report's events and GPU counters.

    The sweep calls this path for every applied report; a caller above both inventory and
    health may call it right after `report_apply` too (recording twice is recording once).
    """
    payload = report.payload or {}
    item = ReportHealth(
        report_id=report.pk,
        server_id=server.pk,
        received_at=report.received_at,
        gpus=list(payload.get("gpus") or []),
        events=list(payload.get("events") or []),
        counters=report.status != ReportStatus.SUPERSEDED,
        applied_at=report.applied_at,
    )
    return health_record_reports(reports=[item])


def health_record_reports(
    *, reports: list[ReportHealth], now: datetime | None = None
) -> RecordResult:
    """Record many reports in a fixed number of queries (one transaction)."""
    now = now or timezone.now()
    result = RecordResult(reports=len(reports))
    if not reports:
        return result
    with transaction.atomic():
        gpus = _gpu_index(reports)
        _record_events(reports, gpus, now, result)
        _record_counters([r for r in reports if r.counters], gpus, result)
    return result


def health_sweep(*, batch: int = 500, budget_s: float = 50.0) -> int:
    """Record every report applied since the cursor; the number recorded (see the module)."""
    HealthCursor.objects.get_or_create(name=CURSOR)
    done = 0
    started = clock.monotonic()
    while clock.monotonic() - started < budget_s:
        with transaction.atomic():
            cursor = HealthCursor.objects.select_for_update().get(name=CURSOR)
            rows = list(
                Report.objects.filter(id__gt=cursor.report_id)
                .order_by("id")
                .values("id", "status", "server_id")[:batch]
            )
            ready: list[int] = []
            blocked = False
            for row in rows:
                if row["status"] == ReportStatus.PENDING:
                    blocked = True  # recorded once applied: the cursor waits here
                    break
                ready.append(row["id"])
            if not ready:
                break
            _record_or_skip(_load(ready))
            cursor.report_id = ready[-1]
            cursor.updated_at = timezone.now()
            cursor.save(update_fields=["report_id", "updated_at"])
        done += len(ready)
        if blocked or len(rows) < batch:
            break
    return done


def _record_or_skip(reports: list[ReportHealth]) -> None:
    """Record a batch; where it fails, each of its reports alone (each in its own savepoint).

    The cursor cannot pass a report the sweep fails on, so one report the code cannot record
    would stop health for every server behind it: that report is logged and left out."""
    try:
        with transaction.atomic():  # a savepoint: what a failure half wrote is undone
            health_record_reports(reports=reports)
        return
    except Exception:  # one bad report must not stop the fleet's health: found below, logged
        if len(reports) == 1:
            logger.exception("health: report %s not recorded", reports[0].report_id)
            return
    for report in reports:
        try:
            with transaction.atomic():
                health_record_reports(reports=[report])
        except Exception:  # logged with its traceback; the sweep goes on
            logger.exception("health: report %s not recorded", report.report_id)


def health_prune(*, now: datetime | None = None) -> dict[str, int]:
    """Forget receipts past their use, and events and counter history past retention."""
    now = now or timezone.now()
    receipts, _ = HealthEventReceipt.objects.filter(
        received_at__lt=now - timedelta(days=settings.ATLAS_HEALTH_RECEIPT_DAYS)
    ).delete()
    events, _ = HealthEvent.objects.filter(
        last_seen__lt=now - timedelta(days=settings.ATLAS_HEALTH_RETENTION_DAYS)
    ).delete()
    samples, _ = GpuCounterSample.objects.filter(
        current=False, taken_at__lt=now - timedelta(days=settings.ATLAS_HEALTH_RETENTION_DAYS)
    ).delete()
    return {"receipts": receipts, "events": events, "samples": samples}


def _load(report_ids: list[int]) -> list[ReportHealth]:
    """The parts of stored reports health reads (not their links, NICs or host facts)."""
    rows = (
        Report.objects.filter(
            id__in=report_ids,
            status__in=(ReportStatus.APPLIED, ReportStatus.SUPERSEDED),
            server__isnull=False,
        )
        .order_by("id")
        .values(
            "id",
            "status",
            "server_id",
            "received_at",
            "applied_at",
            "payload__gpus",
            "payload__events",
        )
    )
    return [
        ReportHealth(
            report_id=row["id"],
            server_id=row["server_id"],
            received_at=row["received_at"],
            gpus=_as_list(row["payload__gpus"]),
            events=_as_list(row["payload__events"]),
            counters=row["status"] == ReportStatus.APPLIED,
            applied_at=row["applied_at"],
        )
        for row in rows
    ]


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, str):  # some backends hand back a JSON fragment as text
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return value if isinstance(value, list) else []


# -- GPUs ------------------------------------------------------------------------------------


def _gpu_index(reports: list[ReportHealth]) -> _GpuIndex:
    """The GPU rows the reports name: by UUID, and by (server, PCI bus) for events whose GPU
    NVML no longer shows (fallen off the bus: the row at that slot, newest first)."""
    uuids = {g.get("uuid") for r in reports for g in r.gpus if g.get("uuid")}
    uuids |= {e.get("gpu_uuid") for r in reports for e in r.events if e.get("gpu_uuid")}
    index = _GpuIndex()
    fields = ("id", "uuid", "serial", "server_id", "pci_bus_id")
    for chunk in _chunks(sorted(uuids)):
        for row in Gpu.objects.filter(uuid__in=chunk).values(*fields):
            index.by_uuid[row["uuid"]] = _GpuRow(**row)
    slots = {
        (r.server_id, bus)
        for r in reports
        for e in r.events
        if e.get("kind") != EventKind.SXID
        and (bus := normalize_pci_bus_id(e.get("pci_bus_id")))
        and e.get("gpu_uuid") not in index.by_uuid
    }
    if slots:
        rows = (
            Gpu.objects.filter(
                server_id__in={s for s, _ in slots}, pci_bus_id__in={b for _, b in slots}
            )
            .order_by("last_seen", "id")
            .values(*fields)
        )
        for row in rows:
            index.by_slot[(row["server_id"], row["pci_bus_id"])] = _GpuRow(**row)
    return index


def _chunks(items: list[Any], size: int = IN_CHUNK) -> Iterable[Sequence[Any]]:
    return chunks(items, size)


# -- events ----------------------------------------------------------------------------------


@dataclass
class _Occurrence:
    server_id: int
    gpu: _GpuRow | None
    gpu_uuid: str
    bus: str
    kind: str
    code: int | None
    message: str
    first: datetime
    last: datetime
    count: int

    @property
    def subject(self) -> tuple[int, str, str, int | None]:
        target = f"gpu:{self.gpu.id}" if self.gpu else f"bus:{self.bus}"
        return (self.server_id, target, self.kind, self.code)


def fingerprint(server_id: int, event: dict[str, Any]) -> str:
    """The agent's key where it gave one (a kernel log position), else the event's content."""
    key = event.get("key")
    basis = key if key else json.dumps(event, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{server_id}\x1f{basis}".encode()).hexdigest()


def _event_time(value: Any, fallback: datetime) -> datetime:
    """The event's time; `fallback` (the receipt) for a time that cannot be one: no date
    (30 February passes the schema's pattern), before 1970, or ahead of the receipt."""
    try:
        parsed = parse_datetime(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None:
        return fallback
    if timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, UTC)
    if parsed < EPOCH or parsed > fallback + FUTURE_SLACK:
        return fallback
    return parsed


def _record_events(
    reports: list[ReportHealth], gpus: _GpuIndex, now: datetime, result: RecordResult
) -> None:
    candidates: dict[str, tuple[ReportHealth, dict[str, Any]]] = {}
    for report in reports:
        for event in report.events:
            if isinstance(event, dict) and event.get("kind") in EventKind.values:
                candidates.setdefault(fingerprint(report.server_id, event), (report, event))
    if not candidates:
        return
    seen: set[str] = set()
    for chunk in _chunks(list(candidates)):
        seen.update(
            HealthEventReceipt.objects.filter(fingerprint__in=chunk).values_list(
                "fingerprint", flat=True
            )
        )
    fresh = [(fp, pair) for fp, pair in candidates.items() if fp not in seen]
    result.duplicates += sum(len(r.events) for r in reports) - len(fresh)
    if not fresh:
        return
    occurrences = [_occurrence(report, event, gpus) for _, (report, event) in fresh]
    occurrences.sort(key=lambda o: o.first)
    episodes = _open_episodes(occurrences)
    gap = timedelta(seconds=settings.ATLAS_HEALTH_EPISODE_GAP_S)
    created: list[HealthEvent] = []
    extended: dict[int, HealthEvent] = {}
    for occ in occurrences:
        episode = episodes.get(occ.subject)
        if (
            episode is not None
            and occ.first <= episode.last_seen + gap
            and occ.last >= episode.first_seen - gap
        ):
            episode.count += occ.count
            episode.first_seen = min(episode.first_seen, occ.first)
            episode.last_seen = max(episode.last_seen, occ.last)
            episode.updated_at = now
            if episode.pk:
                extended[episode.pk] = episode
            continue
        episode = _new_episode(occ, now)
        episodes[occ.subject] = episode
        created.append(episode)
    created = _fold_into_stored(created, extended)
    HealthEvent.objects.bulk_create(created)
    if extended:
        HealthEvent.objects.bulk_update(
            list(extended.values()), ["count", "first_seen", "last_seen", "updated_at"]
        )
    HealthEventReceipt.objects.bulk_create(
        [
            HealthEventReceipt(fingerprint=fp, server_id=report.server_id, received_at=now)
            for fp, (report, _) in fresh
        ],
        ignore_conflicts=True,
    )
    result.episodes_created += len(created)
    result.episodes_extended += len(extended)


def _occurrence(report: ReportHealth, event: dict[str, Any], gpus: _GpuIndex) -> _Occurrence:
    bus = normalize_pci_bus_id(event.get("pci_bus_id")) or ""
    kind = event["kind"]
    gpu = gpus.by_uuid.get(event.get("gpu_uuid") or "")
    if gpu is not None and gpu.server_id != report.server_id and not report.names(gpu.uuid):
        gpu = None  # an agent writes only its own server: another server's GPU is not named
    if gpu is None and bus and kind != EventKind.SXID:
        gpu = gpus.by_slot.get((report.server_id, bus))
    first = _event_time(event.get("time"), report.received_at)
    last = max(first, _event_time(event.get("last_time"), first))
    code = event.get("code")
    return _Occurrence(
        server_id=report.server_id,
        gpu=gpu,
        gpu_uuid=str(event.get("gpu_uuid") or (gpu.uuid if gpu else "")),
        bus=bus,
        kind=kind,
        code=int(code) if isinstance(code, int) else None,
        message=str(event.get("message") or "")[:500],
        first=first,
        last=last,
        count=max(1, int(event.get("count") or 1)),
    )


_EPISODE_FIELDS = (
    "server",
    "gpu",
    "pci_bus_id",
    "kind",
    "code",
    "first_seen",
    "last_seen",
    "count",
)


def _open_episodes(
    occurrences: list[_Occurrence],
) -> dict[tuple[int, str, str, int | None], HealthEvent]:
    """The newest stored episode of each subject that an occurrence could extend."""
    gap = timedelta(seconds=settings.ATLAS_HEALTH_EPISODE_GAP_S)
    since = min(o.first for o in occurrences) - gap
    servers = sorted({o.server_id for o in occurrences})
    found: dict[tuple[int, str, str, int | None], HealthEvent] = {}
    for chunk in _chunks(servers):
        rows = (
            HealthEvent.objects.filter(server_id__in=chunk, last_seen__gte=since)
            .order_by("last_seen", "id")
            .only(*_EPISODE_FIELDS)
        )
        for row in rows:
            target = f"gpu:{row.gpu_id}" if row.gpu_id else f"bus:{row.pci_bus_id}"
            found[(row.server_id, target, row.kind, row.code)] = row
    return found


def _fold_into_stored(
    created: list[HealthEvent], extended: dict[int, HealthEvent]
) -> list[HealthEvent]:
    """The new episodes whose start is already stored, folded into the stored one.

    `_open_episodes` offers each subject its newest episode only: an older one met again (a
    saved kernel log read a second time, its count grown) would be created twice, and the
    unique key would stop the sweep for every server. One query, when anything is new."""
    if not created:
        return created
    stored: dict[str, HealthEvent] = {}
    for chunk in _chunks([episode.dedupe_key for episode in created]):
        for row in HealthEvent.objects.filter(dedupe_key__in=chunk).only(
            *_EPISODE_FIELDS, "dedupe_key"
        ):
            stored[row.dedupe_key] = extended.get(row.pk, row)
    fresh: dict[str, HealthEvent] = {}
    for episode in created:
        into = stored.get(episode.dedupe_key) or fresh.get(episode.dedupe_key)
        if into is None:
            fresh[episode.dedupe_key] = episode
            continue
        into.count += episode.count
        into.first_seen = min(into.first_seen, episode.first_seen)
        into.last_seen = max(into.last_seen, episode.last_seen)
        into.updated_at = episode.updated_at
        if into.pk:
            extended[into.pk] = into
    return list(fresh.values())


def _new_episode(occ: _Occurrence, now: datetime) -> HealthEvent:
    info = event_info(occ.kind, occ.code, occ.message)
    target = f"gpu:{occ.gpu.id}" if occ.gpu else f"bus:{occ.bus}"
    key = f"{occ.server_id}|{target}|{occ.kind}|{occ.code}|{occ.first.isoformat()}"
    return HealthEvent(
        server_id=occ.server_id,
        gpu_id=occ.gpu.id if occ.gpu else None,
        gpu_serial=occ.gpu.serial if occ.gpu else "",
        gpu_uuid=occ.gpu_uuid,
        pci_bus_id=occ.bus,
        kind=occ.kind,
        code=occ.code,
        severity=info.severity,
        action=info.action[:300],
        message=occ.message,
        first_seen=occ.first,
        last_seen=occ.last,
        count=occ.count,
        dedupe_key=key[:200],
        updated_at=now,
    )


# -- counters --------------------------------------------------------------------------------


def counter_values(gpu: dict[str, Any]) -> dict[str, Any] | None:
    """A report GPU's counters, as sample fields; None when it carries none at all."""
    values: dict[str, Any] = {
        sample: gpu.get(field_name) for field_name, sample in _GPU_COUNTERS.items()
    }
    health = gpu.get("health")
    if isinstance(health, dict):
        for name in _HEALTH_COUNTERS:
            values[name] = health.get(name)
        values["ecc_locations"] = health.get("ecc_locations") or []
        values["recovery_action"] = health.get("recovery_action") or ""
    elif all(v is None for v in values.values()):
        return None
    else:
        values.update({name: None for name in _HEALTH_COUNTERS})
        values["ecc_locations"] = []
        values["recovery_action"] = ""
    return values


def _record_counters(reports: list[ReportHealth], gpus: _GpuIndex, result: RecordResult) -> None:
    readings: list[tuple[int, ReportHealth, str, dict[str, Any]]] = []
    for report in reports:
        for gpu in report.gpus:
            row = gpus.by_uuid.get(gpu.get("uuid") or "")  # in the report: apply took it
            values = counter_values(gpu) if row is not None else None
            if row is not None and values is not None:
                bus = normalize_pci_bus_id(gpu.get("pci_bus_id")) or ""
                readings.append((row.id, report, bus, values))
    if not readings:
        return
    current: dict[int, GpuCounterSample] = {}
    ids = sorted({r[0] for r in readings})
    for chunk in _chunks(ids):
        for sample in GpuCounterSample.objects.filter(gpu_id__in=chunk, current=True):
            current[sample.gpu_id] = sample
    created: dict[int, list[GpuCounterSample]] = defaultdict(list)
    retired: list[int] = []
    state_changed: dict[int, GpuCounterSample] = {}
    for gpu_id, report, bus, values in readings:
        values = {**values, "server_id": report.server_id, "pci_bus_id": bus}
        latest = current.get(gpu_id)
        if latest is not None and all(getattr(latest, f) == values[f] for f in COUNTER_FIELDS):
            if any(getattr(latest, f) != values[f] for f in STATE_FIELDS):
                for name in STATE_FIELDS:
                    setattr(latest, name, values[name])
                if latest.pk:
                    state_changed[latest.pk] = latest
            continue
        if latest is not None:
            latest.current = False
            if latest.pk:
                retired.append(latest.pk)
                state_changed.pop(latest.pk, None)
        sample = GpuCounterSample(gpu_id=gpu_id, taken_at=report.taken_at, **values)
        created[gpu_id].append(sample)
        current[gpu_id] = sample
    if retired:
        GpuCounterSample.objects.filter(pk__in=retired).update(current=False)
    rows = [sample for samples in created.values() for sample in samples]
    GpuCounterSample.objects.bulk_create(rows)
    if state_changed:
        GpuCounterSample.objects.bulk_update(list(state_changed.values()), list(STATE_FIELDS))
    result.samples += len(rows)


# -- findings --------------------------------------------------------------------------------


def health_findings_sync(*, now: datetime | None = None) -> tuple[int, int, int]:
    """Write the health rules' findings as `findings.Finding` rows: raise, reopen, resolve.

    Written as the health family, so it never resolves the scheduler layer's or the
    fabric's findings (and their writers never resolve these). A fixed number of queries
    whatever the fleet. Returns (raised, resolved, open).
    """
    now = now or timezone.now()
    desired = {fact.key: fact for fact in health_findings(now=now)}
    with transaction.atomic():
        return findings_write(desired=desired, now=now, family=Family.HEALTH)


def health_findings_replay(*, at: datetime, policy: Policy | None = None) -> int:
    """Raise the event findings that the stored events made at `at`, a moment past, where no
    finding of that subject exists yet: a history loaded at once (the demo's week) then shows
    what was raised back then and has resolved since. Only events seen by `at` are judged, and
    no counters (only the current ones are judged). Touches no other finding; the next
    `health_findings_sync` resolves what no longer holds. Returns the number raised."""
    policy = policy or Policy()
    _states, events = health_rule_inputs(now=at, policy=policy)
    then = [e for e in events if e.first_seen <= at]
    desired = {fact.key: fact for fact in evaluate([], then, at, policy)}
    if not desired:
        return 0
    subjects = [subject for _type, subject in desired]
    known = set(
        Finding.objects.filter(family_q(Family.HEALTH), subject__in=subjects).values_list(
            "type", "subject"
        )
    )
    desired = {key: fact for key, fact in desired.items() if key not in known}
    if not desired:
        return 0
    scope = Q(subject__in=[subject for _type, subject in desired])
    with transaction.atomic():
        raised, _resolved, _open = findings_write(
            desired=desired, now=at, family=Family.HEALTH, scope=scope
        )
    return raised
