"""A report's GPUs and MIG devices, inside `report_apply`'s transaction: upserted by UUID
in bulk, a fixed number of queries whatever the GPU count.

A GPU or MIG device UUID that another live server still lists stays there: the claim is
kept (`GpuClaim`, a finding) until the holder stops listing it or goes offline, and only
then moves, with its change events. GPUs seen on the PCI bus but not by NVML get rows of
their own (`off_nvml_uuid`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import models
from django.db.models import Case, F, Value, When

from agent.schema import normalize_pci_bus_id, synthetic_uuid

from ..choices import ChangeKind, GpuStatus
from ..models import Gpu, GpuClaim, MigDevice, Server
from .applying import PASSTHROUGH_DRIVERS, _described, _Events, _offline, _text

GPU_STRING_FIELDS = (
    "serial",
    "name",
    "board_part_number",
    "architecture",
    "compute_capability",
    "vbios_version",
    "cpu_affinity",
    "error",
    "fabric_cluster_uuid",
    "fabric_state",
    "fabric_status",
)
GPU_VALUE_FIELDS = (
    "memory_total_bytes",
    "power_limit_w",
    "numa_node",
    "persistence_mode",
    "mig_mode_current",
    "mig_mode_pending",
    "ecc_mode_current",
    "ecc_errors_corrected",
    "ecc_errors_uncorrected",
    "retired_pages",
    "retired_pages_pending",
    "remapped_rows_correctable",
    "remapped_rows_uncorrectable",
    "remapped_rows_pending",
    "remapped_rows_failure",
    "fabric_clique_id",
)
GPU_UPDATE_FIELDS = [
    "server",
    "index",
    "uuid_synthetic",
    "status",
    "pci_bus_id",
    "nvlinks",
    "last_seen",
    *GPU_STRING_FIELDS,
    *GPU_VALUE_FIELDS,
]
MIG_FIELDS = (
    "gpu_instance_id",
    "compute_instance_id",
    "memory_bytes",
    "sm_count",
    "placement_start",
    "placement_size",
)


@dataclass
class _Claims:
    """What a report lists that other servers keep: uuid -> the holder's row (values)."""

    gpus: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    mig_devices: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.gpus or self.mig_devices)

    def uuids(self) -> set[str]:
        return set(self.gpus) | set(self.mig_devices)


def _gpu_fields(gpu: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {name: _text(gpu.get(name)) for name in GPU_STRING_FIELDS}
    fields.update({name: gpu.get(name) for name in GPU_VALUE_FIELDS})
    fields["index"] = gpu["index"]
    fields["uuid_synthetic"] = bool(gpu.get("uuid_synthetic"))
    fields["status"] = GpuStatus.ERROR if gpu.get("status") == "error" else GpuStatus.OK
    fields["pci_bus_id"] = normalize_pci_bus_id(gpu.get("pci_bus_id")) or ""
    fields["nvlinks"] = gpu.get("nvlinks") or []
    return fields


GPU_MERGED_FIELDS = (
    *(name for name in GPU_STRING_FIELDS if name != "error"),
    *GPU_VALUE_FIELDS,
    "pci_bus_id",
    "nvlinks",
)


# What a GPU moving in keeps of its row: the card's facts, not its old slot's.
GPU_CARD_FIELDS = (
    "serial",
    "name",
    "board_part_number",
    "architecture",
    "compute_capability",
    "vbios_version",
    "memory_total_bytes",
)


def _merge_gpu_fields(
    fields: dict[str, Any], gpu: dict[str, Any], old: Gpu, *, moved: bool = False
) -> None:
    """A partial report's GPU over its known row: what it leaves null (bus id, memory, serial
    from `nvidia-smi -L`) keeps the row's value; a status it does not give keeps the row's
    (a lost GPU it lists is back). A GPU moving in from another server keeps only the card's
    facts."""
    for name in GPU_CARD_FIELDS if moved else GPU_MERGED_FIELDS:
        if not _described(fields[name]):
            fields[name] = getattr(old, name)
    if moved:
        return
    if gpu.get("status") is None and old.status != GpuStatus.LOST:
        fields["status"], fields["error"] = old.status, old.error


def _mig_layout(devices) -> list[list]:
    """Profiles and instance ids, sorted; an id a partial source did not give sorts first."""
    return sorted(
        ([d["profile"] or "", d["gpu_instance_id"], d["compute_instance_id"]] for d in devices),
        key=lambda d: (d[0], -1 if d[1] is None else d[1], -1 if d[2] is None else d[2]),
    )


def _with_known_mig_facts(
    gpus: list[dict], known: Mapping[int, Sequence[Mapping[str, Any]]]
) -> list[dict]:
    """A partial report's GPUs with what their MIG devices leave null (the GPU and compute
    instance ids that `nvidia-smi -L` does not print, memory, SMs) taken from the stored
    device of the same UUID. Copies: the payload stays what the agent sent."""
    by_uuid = {m["uuid"]: m for rows in known.values() for m in rows}
    merged = []
    for gpu in gpus:
        devices = gpu.get("mig_devices") or []
        if not any(d["uuid"] in by_uuid for d in devices):
            merged.append(gpu)
            continue
        filled = []
        for device in devices:
            old = by_uuid.get(device["uuid"])
            if old is not None:
                device = {
                    **device,
                    **{f: old[f] for f in (*MIG_FIELDS, "profile") if device.get(f) is None},
                }
            filled.append(device)
        merged.append({**gpu, "mig_devices": filled})
    return merged


def _apply_gpus(
    server: Server, payload: dict[str, Any], created: bool, now, events: _Events, partial: bool
) -> tuple[dict[int, int], bool, _Claims]:
    """Upsert GPUs by UUID and their MIG devices; mark the missing ones lost (a partial
    report marks nothing lost, removes no MIG device and keeps what its GPUs leave null).

    A GPU (or MIG device) another server holds moves here only when that server's own latest
    report no longer lists it (its row is lost) or that server is offline; otherwise it is
    left where it is and returned as a claim. Returns report GPU index -> row id (GPUs kept
    by others have none), whether the set of GPUs or MIG devices changed, and the claims.
    """
    claims = _Claims()
    elsewhere = (
        Gpu.objects.filter(uuid__in=[g["uuid"] for g in payload["gpus"]])
        .exclude(server=server)
        .values(
            "uuid",
            "id",
            "server_id",
            "server__hostname",
            "serial",
            "status",
            holder_seen=F("server__last_seen"),
        )
    )
    moved_in: dict[str, Mapping[str, Any]] = {}
    for row in elsewhere:
        if row["status"] != GpuStatus.LOST and not _offline(row["holder_seen"], now):
            claims.gpus[row["uuid"]] = row
        else:
            moved_in[row["uuid"]] = row
    reported = [g for g in payload["gpus"] if g["uuid"] not in claims.gpus]
    existing = {g.uuid: g for g in Gpu.objects.filter(server=server)}
    existing_mig: dict[int, list[Mapping[str, Any]]] = {}
    for mig_row in MigDevice.objects.filter(gpu__server=server).values(
        "id", "gpu_id", "uuid", "profile", *MIG_FIELDS
    ):
        existing_mig.setdefault(mig_row["gpu_id"], []).append(mig_row)
    if partial:
        reported = _with_known_mig_facts(reported, existing_mig)
    reported_uuids = [g["uuid"] for g in reported]
    # A partial report keeps what it leaves null of a GPU it moves in, too (one read, only then).
    arriving = (
        {g.uuid: g for g in Gpu.objects.filter(pk__in=[r["id"] for r in moved_in.values()])}
        if partial and moved_in
        else {}
    )

    changed = False
    rows = []
    for gpu in reported:
        fields = _gpu_fields(gpu)
        old = existing.get(gpu["uuid"])
        if partial and old is not None:
            _merge_gpu_fields(fields, gpu, old)
        elif gpu["uuid"] in arriving:
            _merge_gpu_fields(fields, gpu, arriving[gpu["uuid"]], moved=True)
        if old is not None and not fields["serial"]:
            # A card that failed before NVML gave its serial keeps the last one it gave: the
            # serial is what an RMA asks for, and a report that cannot read it never wipes it.
            fields["serial"] = old.serial
        rows.append(Gpu(server=server, uuid=gpu["uuid"], first_seen=now, last_seen=now, **fields))
        if old is not None:
            if old.status == GpuStatus.LOST:
                changed = True
                events.add(
                    ChangeKind.GPU_RETURNED,
                    f"GPU {gpu['index']} ({old.serial or old.uuid}) is back",
                    gpu_id=old.pk,
                )
            if (
                old.mig_mode_current != fields["mig_mode_current"]
                and old.mig_mode_current is not None
            ):
                changed = True
                events.add(
                    ChangeKind.MIG_MODE,
                    f"GPU {gpu['index']} MIG mode {_onoff(old.mig_mode_current)} → "
                    f"{_onoff(fields['mig_mode_current'])}",
                    gpu_id=old.pk,
                    before={"mig_mode": old.mig_mode_current},
                    after={"mig_mode": fields["mig_mode_current"]},
                )
            known_mig = existing_mig.get(old.pk, [])
            before = _mig_layout(known_mig)
            reported_mig = gpu.get("mig_devices", [])
            after = _mig_layout(
                [*_kept_mig_devices(known_mig, reported_mig), *reported_mig]
                if partial
                else reported_mig
            )
            if before != after:
                changed = True
                events.add(
                    ChangeKind.MIG_RELAYOUT,
                    f"GPU {gpu['index']} MIG layout: {_profiles(before)} → {_profiles(after)}",
                    gpu_id=old.pk,
                    before={"mig_devices": before},
                    after={"mig_devices": after},
                )
            continue
        changed = True
        if gpu["uuid"] in moved_in:
            src = moved_in[gpu["uuid"]]
            events.add(
                ChangeKind.GPU_MOVED_IN,
                f"GPU {gpu['index']} ({fields['serial'] or gpu['uuid']}) moved in from "
                f"{src['server__hostname']}",
                gpu_id=src["id"],
                before={"server": src["server__hostname"]},
                after={"server": server.hostname},
            )
            events.add(
                ChangeKind.GPU_MOVED_OUT,
                f"GPU {fields['serial'] or gpu['uuid']} moved out to {server.hostname}",
                gpu_id=src["id"],
                before={"server": src["server__hostname"]},
                after={"server": server.hostname},
                server=Server(pk=src["server_id"]),
            )
        elif not created:
            # A partial report's new GPU replaces none: the one at its address may be there.
            replaced = next(
                (
                    g
                    for g in existing.values()
                    if not partial
                    and fields["pci_bus_id"]
                    and g.pci_bus_id == fields["pci_bus_id"]
                    and g.uuid not in reported_uuids
                    and g.uuid != off_nvml_uuid(server, g.pci_bus_id)
                ),
                None,
            )
            if replaced is not None:
                events.add(
                    ChangeKind.GPU_REPLACED,
                    f"GPU at {fields['pci_bus_id']} replaced: serial {replaced.serial or '?'} → "
                    f"{fields['serial'] or '?'}",
                    gpu_id=replaced.pk,
                    before={"uuid": replaced.uuid, "serial": replaced.serial},
                    after={"uuid": gpu["uuid"], "serial": fields["serial"]},
                )
            else:
                events.add(
                    ChangeKind.GPU_ADDED,
                    f"GPU {gpu['index']} added: {fields['name']} {fields['serial']}".strip(),
                    after={"uuid": gpu["uuid"], "serial": fields["serial"]},
                )

    upserted = Gpu.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["uuid"], update_fields=GPU_UPDATE_FIELDS
    )
    if any(g.pk is None for g in upserted):
        ids = dict(
            Gpu.objects.filter(server=server, uuid__in=reported_uuids).values_list("uuid", "id")
        )
    else:
        ids = {g.uuid: g.pk for g in upserted}
    index_to_id = {gpu["index"]: ids[gpu["uuid"]] for gpu in reported}
    for event in events.rows:
        if event.kind == ChangeKind.GPU_ADDED and event.gpu_id is None and event.after is not None:
            event.gpu_id = ids.get(event.after["uuid"])

    lost = [
        g
        for g in existing.values()
        if not partial and g.uuid not in ids and g.status != GpuStatus.LOST
    ]
    if lost:
        changed = True
        Gpu.objects.filter(pk__in=[g.pk for g in lost]).update(status=GpuStatus.LOST)
        unseen = {
            normalize_pci_bus_id(p.get("pci_bus_id"))
            for p in payload.get("pci_gpus") or []
            if p.get("in_nvml") is False
        }
        replaced_ids = {e.gpu_id for e in events.rows if e.kind == ChangeKind.GPU_REPLACED}
        for gpu in lost:
            if gpu.pk in replaced_ids:
                continue
            if gpu.pci_bus_id and gpu.pci_bus_id in unseen:
                events.add(
                    ChangeKind.GPU_NOT_IN_NVML,
                    f"GPU {gpu.index} ({gpu.serial or gpu.uuid}) is on the PCI bus at "
                    f"{gpu.pci_bus_id} but NVML no longer sees it (fallen off the bus?)",
                    gpu_id=gpu.pk,
                    before={"status": gpu.status},
                    after={"status": "lost"},
                )
            else:
                events.add(
                    ChangeKind.GPU_REMOVED,
                    f"GPU {gpu.index} ({gpu.serial or gpu.uuid}) no longer reported",
                    gpu_id=gpu.pk,
                    before={"uuid": gpu.uuid, "serial": gpu.serial},
                )

    if _apply_off_nvml_gpus(server, payload, existing, reported, now, events, partial):
        changed = True
    moved_from = _hold_mig_devices(server, reported, moved_in, now, claims)
    _apply_mig_devices(
        server,
        reported,
        ids,
        skip=claims.mig_devices.keys(),
        partial=partial,
        known_mig=existing_mig,
    )
    _release_holders(moved_in, moved_from)
    return index_to_id, changed, claims


def off_nvml_uuid(server: Server, pci_bus_id: str) -> str:
    """The stable id of the row kept for a GPU on `server`'s PCI bus that NVML never listed."""
    return synthetic_uuid("GPU", server.identity, "off-nvml", pci_bus_id)


def _apply_off_nvml_gpus(
    server: Server,
    payload: dict[str, Any],
    existing: Mapping[str, Gpu],
    reported: list[dict],
    now,
    events: _Events,
    partial: bool = False,
) -> bool:
    """Give a GPU on the PCI bus (bound to nvidia or to nothing) that NVML does not show, and
    that no row of this server stands for, a row of its own, lost: it fell off the bus before
    NVML ever listed it, and lists must count and show it (its slot is its place in PCI
    order; serial and UUID are unknown). The row goes once NVML lists a GPU at that address
    or the address leaves the bus. Returns whether such rows changed.

    A partial report makes no such row and removes one only where it lists a GPU at its
    address: what it does not list may be there still."""
    if partial:
        listed = {normalize_pci_bus_id(g.get("pci_bus_id")) for g in reported} - {None}
        found = [
            g.pk
            for g in existing.values()
            if g.pci_bus_id in listed and g.uuid == off_nvml_uuid(server, g.pci_bus_id)
        ]
        if found:
            Gpu.objects.filter(pk__in=found).delete()
        return bool(found)
    buses: dict[str, bool] = {}  # address -> in NVML
    for p in payload.get("pci_gpus") or []:
        bus = normalize_pci_bus_id(p.get("pci_bus_id"))
        if bus and p.get("driver") not in PASSTHROUGH_DRIVERS:
            buses[bus] = p.get("in_nvml") is not False
    slots = sorted(buses)
    unseen = {bus for bus, in_nvml in buses.items() if not in_nvml}
    placeholders = {off_nvml_uuid(server, bus): bus for bus in slots}
    known = {normalize_pci_bus_id(g.get("pci_bus_id")) for g in reported} | {
        g.pci_bus_id for g in existing.values() if g.uuid not in placeholders
    }
    wanted = {off_nvml_uuid(server, bus): bus for bus in unseen - known}
    stale = [
        g.pk
        for g in existing.values()
        if g.uuid == off_nvml_uuid(server, g.pci_bus_id) and g.uuid not in wanted
    ]
    if stale:
        Gpu.objects.filter(pk__in=stale).delete()
    new = [(uuid, bus) for uuid, bus in wanted.items() if uuid not in existing]
    for uuid, bus in new:
        gpu = Gpu.objects.create(
            server=server,
            index=slots.index(bus),
            uuid=uuid,
            uuid_synthetic=True,
            status=GpuStatus.LOST,
            pci_bus_id=bus,
            first_seen=now,
            last_seen=now,
        )
        events.add(
            ChangeKind.GPU_NOT_IN_NVML,
            f"GPU in slot {gpu.index} is on the PCI bus at {bus} but NVML does not show it "
            "(fallen off the bus?)",
            gpu_id=gpu.pk,
            after={"status": "lost", "pci_bus_id": bus},
        )
    return bool(stale or new)


def _hold_mig_devices(
    server: Server,
    reported: list[dict],
    moved_in: Mapping[str, Mapping[str, Any]],
    now,
    claims: _Claims,
) -> set[int]:
    """Put MIG devices that another live server holds (and so still lists) into `claims`.

    A MIG row exists only while its server's latest report lists it, so only an offline
    holder lets it move. Returns the servers MIG devices move away from.
    """
    uuids = [mig["uuid"] for gpu in reported for mig in gpu.get("mig_devices", [])]
    if not uuids:
        return set()
    moving_gpus = [row["id"] for row in moved_in.values()]
    moved_from = set()
    for row in (
        MigDevice.objects.filter(uuid__in=uuids)
        .exclude(gpu__server=server)
        .exclude(gpu_id__in=moving_gpus)
        .values(
            "uuid",
            "id",
            "gpu_id",
            holder_id=F("gpu__server_id"),
            holder_seen=F("gpu__server__last_seen"),
        )
    ):
        if _offline(row["holder_seen"], now):
            moved_from.add(row["holder_id"])
        else:
            claims.mig_devices[row["uuid"]] = row
    return moved_from


def _release_holders(moved_in: Mapping[str, Mapping[str, Any]], mig_moved_from: set[int]) -> None:
    """Servers that lost a GPU or MIG device to this report: what they hold changed without
    a report of theirs, so their next report must be applied in full, not taken for a
    heartbeat. A GPU their last report still listed leaves their PCI count with it (else
    they would show a GPU "on the PCI bus, not in NVML")."""
    holders = {row["server_id"] for row in moved_in.values()} | mig_moved_from
    if not holders:
        return
    listed = Counter(
        row["server_id"] for row in moved_in.values() if row["status"] != GpuStatus.LOST
    )
    Server.objects.filter(pk__in=holders).update(
        last_report_hash="",
        placement_shape="",
        pci_gpu_count=Case(
            *(
                When(pk=pk, pci_gpu_count__gte=n, then=F("pci_gpu_count") - Value(n))
                for pk, n in listed.items()
            ),
            default=F("pci_gpu_count"),
            output_field=models.PositiveIntegerField(null=True),
        ),
    )


def _record_claims(server: Server, claims: _Claims, now, partial: bool = False) -> bool:
    """Keep this server's open claims, one per UUID (first_seen kept); True if the set changed.
    A partial report only adds and refreshes claims: one it does not list may stand still."""
    before = set(GpuClaim.objects.filter(server=server).values_list("uuid", flat=True))
    after = claims.uuids() | (before if partial else set())
    if before - after:
        GpuClaim.objects.filter(server=server, uuid__in=before - after).delete()
    rows = [
        GpuClaim(server=server, uuid=uuid, gpu_id=row["id"], first_seen=now, last_seen=now)
        for uuid, row in claims.gpus.items()
    ] + [
        GpuClaim(
            server=server,
            uuid=uuid,
            gpu_id=row["gpu_id"],
            mig_device_id=row["id"],
            first_seen=now,
            last_seen=now,
        )
        for uuid, row in claims.mig_devices.items()
    ]
    if rows:
        GpuClaim.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["server", "uuid"],
            update_fields=["gpu", "mig_device", "last_seen"],
        )
    return before != after


def _kept_mig_devices(
    known: Sequence[Mapping[str, Any]], reported: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The known MIG devices of one GPU that a partial report's devices of it leave standing:
    all but those it lists again and those whose GPU and compute instance it gives another
    UUID (one slot holds one device)."""
    uuids = {m["uuid"] for m in reported}
    slots = {_slot(m) for m in reported} - {None}
    return [m for m in known if m["uuid"] not in uuids and _slot(m) not in slots]


def _slot(device: Mapping[str, Any]) -> tuple[int, int] | None:
    """The GPU and compute instance a MIG device stands in; None where the source (a partial
    `nvidia-smi -L`) did not say, which displaces nothing."""
    gi, ci = device["gpu_instance_id"], device["compute_instance_id"]
    return None if gi is None or ci is None else (gi, ci)


def _apply_mig_devices(
    server: Server,
    reported: list[dict],
    gpu_ids: dict[str, int],
    skip: Iterable[str] = (),
    partial: bool = False,
    known_mig: Mapping[int, Sequence[Mapping[str, Any]]] | None = None,
) -> None:
    """Upsert the MIG devices of this server's GPUs by UUID, except those kept by others. A
    full report deletes the rest; a partial one only the devices its own devices displace
    (another UUID in the same GPU and compute instance of a GPU it lists)."""
    skipped = set(skip)
    rows = [
        MigDevice(
            gpu_id=gpu_ids[gpu["uuid"]],
            uuid=mig["uuid"],
            uuid_synthetic=bool(mig.get("uuid_synthetic")),
            profile=_text(mig.get("profile")),
            **{name: mig.get(name) for name in MIG_FIELDS},
        )
        for gpu in reported
        for mig in gpu.get("mig_devices", [])
        if mig["uuid"] not in skipped
    ]
    if not partial:
        gone = MigDevice.objects.filter(gpu__server=server).exclude(uuid__in=[r.uuid for r in rows])
        gone.delete()
    else:
        uuids = {r.uuid for r in rows}
        slots = {
            (r.gpu_id, r.gpu_instance_id, r.compute_instance_id)
            for r in rows
            if r.gpu_instance_id is not None and r.compute_instance_id is not None
        }
        displaced = [
            m["id"]
            for gpu_id, known in (known_mig or {}).items()
            for m in known
            if m["uuid"] not in uuids
            and (gpu_id, m["gpu_instance_id"], m["compute_instance_id"]) in slots
        ]
        if displaced:
            MigDevice.objects.filter(pk__in=displaced).delete()
    if rows:
        MigDevice.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["uuid"],
            update_fields=["gpu", "uuid_synthetic", "profile", *MIG_FIELDS],
        )


def _onoff(value) -> str:
    return {True: "on", False: "off"}.get(value, "unknown")


def _profiles(layout: list[list]) -> str:
    return ", ".join(p[0] or "?" for p in layout) or "none"
