"""Reads of the health layer: event lists, a GPU's lifecycle, and the facts the rules need.

Each costs a fixed number of queries whatever the fleet or the history holds.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

from django.db.models import F, Q, QuerySet
from django.utils import timezone

from inventory.choices import ChangeKind, GpuStatus
from inventory.models import ChangeEvent, Gpu

from .choices import Severity
from .models import GpuCounterSample, HealthEvent
from .rules import REBOOT_ACTIONS, RESET_ACTIONS, EventFact, FindingFact, GpuState, Policy, evaluate

HISTORY_EVENTS = 500
HISTORY_SAMPLES = 5000  # counter samples read for placements; the newest 100 are listed
HISTORY_COUNTERS = 100
_MOVES = (ChangeKind.GPU_MOVED_IN, ChangeKind.GPU_MOVED_OUT)


def health_event_list() -> QuerySet[HealthEvent]:
    return HealthEvent.objects.select_related("server")


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
        if sample.server_id:
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
