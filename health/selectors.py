"""Reads of the health layer: event lists, a GPU's lifecycle, the facts the rules need, when
a GPU needs action, and what the health pages show (GPUs needing action, events by code over
time, repeat offenders ranked, totals by model and rack).

Each costs a fixed number of queries whatever the fleet or the history holds.

When a GPU needs action (drain, reset, reboot or RMA) is the one rule of `health.action`,
that the health page, the GPUs page, placement, failure domains, the capacity planner and the
overview all read: lost GPUs, GPUs failing NVML, GPUs with an open health finding, GPUs on a
server with an open critical finding, each named as such (`GpuNeedingAction.words`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any, TypedDict

from django.db.models import (
    BigIntegerField,
    Case,
    Count,
    F,
    IntegerField,
    Max,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.functions import TruncDate
from django.utils import timezone

from core.figures import FONT, esc
from core.palette import CRITICAL, WARNING, tone_colour
from findings.choices import SEVERITY_ORDER
from findings.models import Finding
from inventory.choices import ChangeKind, GpuStatus
from inventory.models import ChangeEvent, Gpu

from .action import (
    ActionReason,
    action_finding_id,
    action_reason_code,
    action_words,
    candidates_q,
    reason_of_code,
)
from .catalog import FALLEN_OFF_BUS_ACTION, event_info, xid_info
from .choices import EventKind, Severity
from .models import GpuCounterSample, HealthEvent
from .rules import REBOOT_ACTIONS, RESET_ACTIONS, EventFact, FindingFact, GpuState, Policy, evaluate

HISTORY_EVENTS = 500
HISTORY_SAMPLES = 5000  # counter samples read for placements; the newest 100 are listed
HISTORY_COUNTERS = 100
_MOVES = (ChangeKind.GPU_MOVED_IN, ChangeKind.GPU_MOVED_OUT)


def health_event_list() -> QuerySet[HealthEvent]:
    """Events with their server and GPU rows (an event's `sentence` names both)."""
    return HealthEvent.objects.select_related("server", "gpu")


RECENT_EVENTS = 50


def recent_gpu_events(limit: int = RECENT_EVENTS) -> list[HealthEvent]:
    """The latest events of the fleet, each with its server and GPU (for "Xid 79 on dgx-07
    GPU 3 at 10:02 while job 5679 of alice held it"): one query."""
    return list(health_event_list().order_by("-last_seen", "-id")[:limit])


# -- lifecycle -------------------------------------------------------------------------------


def gpu_history(*, gpu_id: int) -> dict[str, Any] | None:
    """Every server and slot the GPU was in, its replacements, changes, events and counters.

    The GPU is followed by its serial (its UUID where it has none), so rows of one board seen
    under different UUIDs (after an RMA repair) are one history. Five queries.
    """
    gpu = Gpu.objects.select_related("server").filter(pk=gpu_id).first()
    if gpu is None:
        return None
    same = Q(serial=gpu.serial) if gpu.serial else Q(uuid=gpu.uuid)
    family = list(Gpu.objects.filter(same | Q(pk=gpu.pk)).select_related("server"))
    ids = [g.pk for g in family]
    uuids = [g.uuid for g in family]
    changes = list(
        ChangeEvent.objects.filter(
            Q(gpu_id__in=ids)
            | Q(kind=ChangeKind.GPU_REPLACED, after__uuid__in=uuids)
            | Q(kind=ChangeKind.GPU_REPLACED, server_id=gpu.server_id)
        )
        .select_related("server", "gpu")
        .order_by("created_at", "id")
    )
    events_q = Q(gpu_id__in=ids) | (Q(gpu_serial=gpu.serial) if gpu.serial else Q())
    events = list(
        health_event_list().filter(events_q).order_by("-last_seen", "-id")[:HISTORY_EVENTS]
    )
    samples = list(
        GpuCounterSample.objects.filter(gpu_id__in=ids)
        .select_related("server")
        .order_by("-taken_at", "-id")[:HISTORY_SAMPLES]
    )
    samples.reverse()
    mine = [c for c in changes if c.gpu_id in ids or _installed(c, uuids)]
    slot = _slot(gpu, changes)
    replacements = _replacements(slot, mine, uuids)
    for occupant in slot["occupants"]:
        occupant.pop("_change")
    return {
        "gpu": gpu,
        "identity": f"serial:{gpu.serial}" if gpu.serial else f"uuid:{gpu.uuid}",
        "gpus": family,
        "placements": _placements(gpu, family, mine, samples, events),
        "replacements": replacements,
        "slot": slot,
        "changes": mine,
        "events": events,
        "counters": list(reversed(samples[-HISTORY_COUNTERS:])),
    }


def _installed(change: ChangeEvent, uuids: list[str]) -> bool:
    return change.kind == ChangeKind.GPU_REPLACED and (change.after or {}).get("uuid") in uuids


def _placements(
    gpu: Gpu,
    family: list[Gpu],
    changes: list[ChangeEvent],
    samples: list[GpuCounterSample],
    events: list[HealthEvent],
) -> list[dict[str, Any]]:
    """Stretches of time on one server: from every sighting of the GPU on the backend's clock
    (counter samples name server and slot; moves, replacements and first/last seen name the
    server), in time order, consecutive sightings on one server joined. Event times come from
    the server's log clock and only fill in a slot."""
    tiny = timedelta(microseconds=1)
    sightings: list[tuple[datetime, int, str, str]] = []
    first_server: dict[int, tuple[int, str]] = {}
    for change in changes:
        if change.kind == ChangeKind.GPU_MOVED_OUT:
            if change.gpu_id is not None:  # always: these are the family's own changes
                first_server.setdefault(change.gpu_id, (change.server_id, change.server.hostname))
            sightings.append(
                (change.created_at - tiny, change.server_id, change.server.hostname, "")
            )
        elif change.kind == ChangeKind.GPU_MOVED_IN:
            sightings.append((change.created_at, change.server_id, change.server.hostname, ""))
        elif change.kind == ChangeKind.GPU_REPLACED and change.gpu_id != gpu.pk:
            bus = change.gpu.pci_bus_id if change.gpu else ""
            sightings.append((change.created_at, change.server_id, change.server.hostname, bus))
    for row in family:
        server_id, hostname = first_server.get(row.pk, (row.server_id, row.server.hostname))
        sightings.append(
            (
                row.first_seen,
                server_id,
                hostname,
                row.pci_bus_id if server_id == row.server_id else "",
            )
        )
        sightings.append((row.last_seen, row.server_id, row.server.hostname, row.pci_bus_id))
    for sample in samples:
        if sample.server_id and sample.server is not None:
            sightings.append(
                (sample.taken_at, sample.server_id, sample.server.hostname, sample.pci_bus_id)
            )
    sightings.sort(key=lambda s: s[0])
    runs: list[dict[str, Any]] = []
    for when, server_id, hostname, bus in sightings:
        if runs and runs[-1]["server"] == server_id:
            run = runs[-1]
            run["_buses"][bus] += 1 if bus else 0
            run["_last"] = when
            continue
        if runs:
            runs[-1]["end"] = when
        runs.append(
            {
                "server": server_id,
                "hostname": hostname,
                "start": when,
                "end": None,
                "_buses": Counter({bus: 1} if bus else {}),
                "_last": when,
            }
        )
    current = gpu.server_id
    for run in runs:
        buses = run.pop("_buses")
        last = run.pop("_last")
        run["pci_bus_id"] = buses.most_common(1)[0][0] if buses else ""
        run["index"] = gpu.index if run["server"] == current else None
        if run is runs[-1] and run["server"] != current:
            run["end"] = last
    if runs and runs[-1]["server"] == current:
        runs[-1]["pci_bus_id"] = gpu.pci_bus_id or runs[-1]["pci_bus_id"]
    ids = {g.pk for g in family}
    event_bus = {e.server_id: e.pci_bus_id for e in events if e.gpu_id in ids and e.pci_bus_id}
    for run in runs:
        run["pci_bus_id"] = run["pci_bus_id"] or event_bus.get(run["server"], "")
    return runs


def _slot(gpu: Gpu, changes: list[ChangeEvent]) -> dict[str, Any]:
    """Every board that sat in this GPU's slot, in order: the first one replaced there, then
    each replacement's new board (a replacement's new board is certain; which row it replaced
    is the board installed before it)."""
    bus = gpu.pci_bus_id
    here = sorted(
        (
            c
            for c in changes
            if c.kind == ChangeKind.GPU_REPLACED
            and c.server_id == gpu.server_id
            and bus
            and ((c.gpu and c.gpu.pci_bus_id == bus) or bus in c.summary)
        ),
        key=lambda c: (c.created_at, c.id),
    )
    occupants: list[dict[str, Any]] = []
    for change in here:
        before, after = change.before or {}, change.after or {}
        if not occupants:
            occupants.append(_occupant(before, change.gpu_id, None))
        occupants[-1]["end"] = change.created_at
        occupants.append(_occupant(after, None, change.created_at, change))
    if not occupants:
        occupants.append(_occupant({"uuid": gpu.uuid, "serial": gpu.serial}, gpu.pk, None))
    for occupant in occupants:
        if occupant["uuid"] == gpu.uuid:
            occupant["gpu"] = gpu.pk
    return {
        "server": gpu.server_id,
        "hostname": gpu.server.hostname,
        "pci_bus_id": bus,
        "occupants": occupants,
    }


def _occupant(
    facts: dict[str, Any], gpu_id: int | None, start: Any, change: ChangeEvent | None = None
) -> dict[str, Any]:
    return {
        "uuid": facts.get("uuid") or "",
        "serial": facts.get("serial") or "",
        "gpu": gpu_id,
        "start": start,
        "end": None,
        "_change": change,
    }


def _replacements(
    slot: dict[str, Any], changes: list[ChangeEvent], uuids: list[str]
) -> list[dict[str, Any]]:
    """This board's replacements: in its current slot from the slot's order of boards, in
    slots it left from the change events naming it."""
    out: list[dict[str, Any]] = []
    occupants = slot["occupants"]
    counted: set[int] = set()
    for before, after in pairwise(occupants):
        change = after["_change"]
        counted.add(change.pk)
        if after["uuid"] in uuids or before["uuid"] in uuids:
            out.append(
                {
                    "at": change.created_at,
                    "server": slot["server"],
                    "hostname": slot["hostname"],
                    "pci_bus_id": slot["pci_bus_id"],
                    "role": "installed" if after["uuid"] in uuids else "removed",
                    "removed": {"uuid": before["uuid"], "serial": before["serial"]},
                    "installed": {"uuid": after["uuid"], "serial": after["serial"]},
                }
            )
    for change in changes:
        if change.kind != ChangeKind.GPU_REPLACED or change.pk in counted:
            continue
        installed = (change.after or {}).get("uuid") in uuids
        out.append(
            {
                "at": change.created_at,
                "server": change.server_id,
                "hostname": change.server.hostname,
                "pci_bus_id": change.gpu.pci_bus_id if change.gpu else "",
                "role": "installed" if installed else "removed",
                "removed": change.before or {},
                "installed": change.after or {},
            }
        )
    out.sort(key=lambda r: r["at"])
    return out


# -- rule inputs -----------------------------------------------------------------------------


def health_rule_inputs(*, now: datetime, policy: Policy) -> tuple[list[GpuState], list[EventFact]]:
    """The current counters of GPUs that show a problem, and the recent events. Two queries:
    healthy GPUs (nearly all of 200,000) never leave the database."""
    horizon = now - max(
        policy.fatal_window, policy.repeat_window, policy.slot_window, policy.server_window
    )
    events = [
        EventFact(
            server_id=row["server_id"],
            hostname=row["server__hostname"],
            gpu_id=row["gpu_id"],
            gpu_serial=row["gpu_serial"],
            gpu_uuid=row["gpu_uuid"],
            pci_bus_id=row["pci_bus_id"],
            kind=row["kind"],
            code=row["code"],
            severity=row["severity"],
            action=row["action"],
            count=row["count"],
            first_seen=row["first_seen"],
            last_seen=row["last_seen"],
        )
        for row in HealthEvent.objects.filter(last_seen__gte=horizon)
        .exclude(severity=Severity.INFO)
        .values(
            "server_id",
            "server__hostname",
            "gpu_id",
            "gpu_serial",
            "gpu_uuid",
            "pci_bus_id",
            "kind",
            "code",
            "severity",
            "action",
            "count",
            "first_seen",
            "last_seen",
        )
    ]
    problems = (
        Q(remapped_rows_failure=True)
        | Q(remapped_rows_pending=True)
        | Q(retired_pages_pending=True)
        | Q(ecc_volatile_uncorrected__gt=0)
        | Q(ecc_volatile_uncorrected__isnull=True, ecc_aggregate_uncorrected__gt=0)
        | Q(pcie_link_width_current__lt=F("pcie_link_width_max"))
        | Q(pcie_link_gen_current__lt=F("pcie_link_gen_max"), performance_state=0)
        | Q(
            recovery_action__in=[
                *RESET_ACTIONS,
                *REBOOT_ACTIONS,
                "drain_p2p",
                "recover_imex_domain",
            ]
        )
    )
    fields = [f for f in GpuState.__dataclass_fields__ if f not in _STATE_FROM_GPU]
    states = [
        GpuState(
            gpu_id=row["gpu_id"],
            server_id=row["gpu__server_id"],
            hostname=row["gpu__server__hostname"],
            index=row["gpu__index"],
            uuid=row["gpu__uuid"],
            serial=row["gpu__serial"],
            pci_bus_id=row["gpu__pci_bus_id"],
            **{name: row[name] for name in fields},
        )
        for row in GpuCounterSample.objects.filter(problems, current=True)
        .exclude(gpu__status=GpuStatus.LOST)
        .values(
            "gpu_id",
            "gpu__server_id",
            "gpu__server__hostname",
            "gpu__index",
            "gpu__uuid",
            "gpu__serial",
            "gpu__pci_bus_id",
            *fields,
        )
    ]
    return states, events


_STATE_FROM_GPU = ("gpu_id", "server_id", "hostname", "index", "uuid", "serial", "pci_bus_id")


def health_findings(
    *, now: datetime | None = None, policy: Policy | None = None
) -> list[FindingFact]:
    """The health findings that should be open now (for the writer of findings to persist)."""
    now = now or timezone.now()
    policy = policy or Policy()
    states, events = health_rule_inputs(now=now, policy=policy)
    return evaluate(states, events, now, policy)


# -- when a GPU needs action ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GpuNeedingAction:
    """A GPU needing action (`health.action`) with its reason in words and what to do."""

    gpu_id: int
    index: int
    serial: str
    uuid: str
    server_id: int
    hostname: str
    reason: str
    words: str
    severity: str
    action: str
    since: datetime | None
    finding_id: int | None

    @property
    def name(self) -> str:
        """How every page names it: `dgx-h100-10 GPU 5`; a lost one `... GPU 5 (lost)` (NVML
        numbers the GPUs it still sees from 0, so another GPU may carry its index now)."""
        lost = self.reason in (ActionReason.LOST, ActionReason.LOST_OFF_BUS)
        return f"{self.hostname} GPU {self.index}" + (" (lost)" if lost else "")


def gpus_needing_action_qs(queryset: QuerySet[Gpu] | None = None) -> QuerySet[Gpu]:
    """The GPUs (of `queryset`, else the fleet) needing action, each annotated with
    `action_reason` (`action_reason_code`) and `action_finding` (the finding's id)."""
    base = Gpu.objects.all() if queryset is None else queryset
    return (
        base.filter(candidates_q())
        .annotate(action_reason=action_reason_code(), action_finding=action_finding_id())
        .filter(action_reason__gt=0)
    )


def annotate_action(queryset: QuerySet[Gpu]) -> QuerySet[Gpu]:
    """Every GPU of `queryset` with `action_reason` (0: none) and `action_finding`, judged only
    where `candidates_q` holds (a list page of healthy GPUs judges none of them)."""
    return queryset.annotate(
        action_reason=Case(
            When(candidates_q(), then=action_reason_code()),
            default=Value(0),
            output_field=IntegerField(),
        ),
        action_finding=Case(
            When(candidates_q(), then=action_finding_id()),
            default=Value(None),
            output_field=BigIntegerField(),
        ),
    )


def action_filter(queryset: QuerySet[Gpu], needed: bool) -> QuerySet[Gpu]:
    """`queryset` cut to the GPUs needing action (`needed`), or to the others."""
    ids = gpus_needing_action_qs().values("pk")
    return queryset.filter(pk__in=ids) if needed else queryset.exclude(pk__in=ids)


_DEFAULT_ACTIONS = {
    ActionReason.LOST_OFF_BUS: FALLEN_OFF_BUS_ACTION,
    ActionReason.LOST: (
        "Find out where it went: reseat it if it is in the server, or record its removal."
    ),
    ActionReason.NVML_ERROR: "Drain the GPU and reset it (nvidia-smi -r), or reboot the node.",
    ActionReason.SERVER_CRITICAL: (
        "Drain the node: no job should land on it until the server's finding is resolved."
    ),
}


def action_rows(gpus: Sequence[Gpu]) -> list[GpuNeedingAction | None]:
    """Per annotated GPU row (`annotate_action`, `gpus_needing_action_qs`, with its server),
    its action in words, None for a GPU needing none: one query for the findings named."""
    ids: set[int] = {f for g in gpus if (f := getattr(g, "action_finding", None))}
    found = {f.pk: f for f in Finding.objects.filter(pk__in=ids)} if ids else {}
    out: list[GpuNeedingAction | None] = []
    for gpu in gpus:
        reason = reason_of_code(getattr(gpu, "action_reason", 0) or 0)
        if reason is None:
            out.append(None)
            continue
        finding_id = getattr(gpu, "action_finding", None)
        finding = found.get(finding_id) if finding_id else None
        named = (
            finding
            if reason in (ActionReason.HEALTH_FINDING, ActionReason.SERVER_CRITICAL)
            else None
        )
        out.append(
            GpuNeedingAction(
                gpu_id=gpu.pk,
                index=gpu.index,
                serial=gpu.serial,
                uuid=gpu.uuid,
                server_id=gpu.server_id,
                hostname=gpu.server.hostname,
                reason=reason,
                words=action_words(
                    reason, named.type if named else None, named.details if named else None
                ),
                severity=finding.severity if finding else Severity.CRITICAL,
                action=(finding.action if finding and finding.action else "")
                or _DEFAULT_ACTIONS.get(ActionReason(reason), ""),
                since=finding.first_seen if finding else gpu.last_seen,
                finding_id=finding.pk if finding else None,
            )
        )
    return out


def gpus_needing_action() -> list[GpuNeedingAction]:
    """Every GPU needing action, the most severe first, then by reason, server and index (two
    queries)."""
    gpus = list(
        gpus_needing_action_qs()
        .select_related("server")
        .order_by(F("action_reason").asc(), "server__hostname", "index", "id")
    )
    rows = [row for row in action_rows(gpus) if row is not None]
    return sorted(rows, key=lambda r: SEVERITY_ORDER.index(r.severity))


def gpus_needing_action_by_reason(rows: list[GpuNeedingAction]) -> list[dict[str, Any]]:
    """The rows grouped by their reason in words, the most GPUs first, each naming its GPUs
    (`names`) and, per server, their indexes (`servers`: hostname, server id, rows)."""
    groups: dict[str, list[GpuNeedingAction]] = {}
    for row in rows:
        groups.setdefault(row.words, []).append(row)
    out = []
    for words, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        servers: dict[int, dict[str, Any]] = {}
        for m in members:
            entry = servers.setdefault(
                m.server_id, {"hostname": m.hostname, "server_id": m.server_id, "rows": []}
            )
            entry["rows"].append(m)
        out.append(
            {
                "label": words,
                "gpus": len(members),
                "names": [m.name for m in members],
                "servers": list(servers.values()),
            }
        )
    return out


def gpus_needing_action_count() -> int:
    """Distinct GPUs needing action, fleet-wide (one query)."""
    return gpus_needing_action_qs().count()


def needing_action_share() -> float:
    """The share (0..1) of the fleet's GPUs (lost ones excluded) needing action (one query)."""
    counts = (
        annotate_action(Gpu.objects.exclude(status=GpuStatus.LOST))
        .order_by()
        .aggregate(gpus=Count("id"), needing=Count("id", filter=Q(action_reason__gt=0)))
    )
    return counts["needing"] / counts["gpus"] if counts["gpus"] else 0.0


# -- the health pages ------------------------------------------------------------

OFFENDERS = 20  # rows of each ranking
TIMELINE_DAYS = 30


def health_overview(*, now: datetime | None = None) -> dict[str, Any]:
    """The overview's health card: the GPUs needing action by reason, each named (the health
    page's rows), and the health events of the last day and week (three queries)."""
    now = now or timezone.now()
    day, week = now - timedelta(days=1), now - timedelta(days=7)
    events = HealthEvent.objects.filter(last_seen__gte=week).aggregate(
        day_episodes=Count("id", filter=Q(last_seen__gte=day)),
        day_events=Sum("count", filter=Q(last_seen__gte=day)),
        day_critical=Count("id", filter=Q(last_seen__gte=day, severity="critical")),
        week_episodes=Count("id"),
        week_events=Sum("count"),
        week_critical=Count("id", filter=Q(severity="critical")),
    )
    rows = gpus_needing_action()
    return {
        "needing_action": len(rows),
        "by_reason": gpus_needing_action_by_reason(rows),
        "events": [
            {
                "window": window,
                "episodes": events[f"{key}_episodes"] or 0,
                "events": events[f"{key}_events"] or 0,
                "critical": events[f"{key}_critical"] or 0,
            }
            for key, window in (("day", "last day"), ("week", "last week"))
        ],
    }


def _ranked(events: QuerySet[HealthEvent], *keys: str) -> list[dict[str, Any]]:
    return list(
        events.values(*keys)
        .annotate(events=Sum("count"), episodes=Count("id"), last=Max("last_seen"))
        .order_by("-episodes", "-events", *keys)[:OFFENDERS]
    )


OFFENDER_KEYS = {
    "gpus": ("gpu_serial", "gpu_id", "server__hostname"),
    "slots": ("server_id", "server__hostname", "pci_bus_id"),
    "servers": ("server_id", "server__hostname"),
}
"""What a repeat offender is: a GPU (by serial), a slot (server and bus), a server."""


def repeat_offenders(*, since: datetime, by: str) -> list[dict[str, Any]]:
    """GPUs, slots or servers (`by`, a key of OFFENDER_KEYS) ranked by failure episodes since
    `since`, info events left out (one query)."""
    recent = HealthEvent.objects.filter(last_seen__gte=since).exclude(severity="info")
    if by == "gpus":
        recent = recent.exclude(gpu_serial="")
    elif by == "slots":
        recent = recent.exclude(pci_bus_id="")
    return _ranked(recent, *OFFENDER_KEYS[by])


class EventGroup(TypedDict):
    group: str | None  # the GPU model or the rack
    events: int
    episodes: int


def events_by(*, since: datetime, key: str) -> list[EventGroup]:
    """Events grouped by a GPU model or a rack (one query)."""
    return list(
        HealthEvent.objects.filter(last_seen__gte=since)
        .values(group=F(key))
        .annotate(events=Sum("count"), episodes=Count("id"))
        .order_by("-episodes", "group")
    )


def code_label(kind: str, code: int | None) -> str:
    return f"{EventKind(kind).label} {code}" if code is not None else EventKind(kind).label


def events_figure(*, now: datetime | None = None, days: int = TIMELINE_DAYS) -> dict[str, Any]:
    """Events per day by code as stacked bars; the catalog's meaning on hover (escaped)."""
    now = now or timezone.now()
    rows = (
        HealthEvent.objects.filter(last_seen__gte=now - timedelta(days=days))
        .annotate(day=TruncDate("last_seen"))
        .values("day", "kind", "code")
        .annotate(events=Sum("count"))
        .order_by("kind", "code", "day")
    )
    traces: dict[tuple[str, int | None], dict[str, Any]] = {}
    for row in rows:
        key = (row["kind"], row["code"])
        trace = traces.get(key)
        if trace is None:
            info = event_info(row["kind"], row["code"])
            tone = CRITICAL if info.severity == "critical" else WARNING
            trace = traces[key] = {
                "type": "bar",
                "name": esc(code_label(*key)),
                "x": [],
                "y": [],
                "marker": {"color": tone_colour(tone), "line": {"color": "#ffffff", "width": 1}},
                "hovertemplate": f"{esc(code_label(*key))}: {esc(info.meaning)}"
                "<br>%{x}: %{y} events<extra></extra>",
            }
        trace["x"].append(row["day"].isoformat())
        trace["y"].append(row["events"])
    return {
        "data": list(traces.values()),
        "layout": {
            "barmode": "stack",
            "font": FONT,
            "height": 320,
            "margin": {"l": 50, "r": 20, "t": 10, "b": 40},
            "yaxis": {"title": {"text": "events"}},
            "showlegend": True,
        },
    }


def xid_meaning(code: int | None) -> str:
    """The catalog's meaning of an Xid, for a `title` on hover."""
    return xid_info(code).meaning
