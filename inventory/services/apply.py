"""Applying a stored report to the inventory: one transaction, idempotent, bulk.

The cost is a fixed number of queries whatever the GPU count. Two reports of one server
applied at once serialise on the server's row lock (and the unique identity), so they never
duplicate rows; a report older than the last one applied is marked superseded.

A report writes only its own server (like Kubernetes' NodeRestriction). Where it names
something another server holds, that server's own reports decide:
- a GPU or MIG device UUID another live server still lists stays there; the claim is kept
  (`GpuClaim`, a finding) until the holder stops listing it or goes offline, and only then
  moves, with its change events;
- a guest UUID links a VM only when the VM's own report says it is virtual, and never takes
  it from a live host that still runs it (`vm_host_for`).
Host names, machine-ids, addresses and NIC names are per server: a copy of another server's
makes a duplicate-identity finding, never a write there.

A partial report (`partial: true`: a trimmed capture, `nvidia-smi -L`) adds and updates what
it describes and leaves the rest as it was: no GPU is marked lost, no MIG device, NIC, disk,
link, guest or claim is deleted, and a value it leaves null keeps the known one. The server
records that its last report was partial (`last_report_partial`, with the reason).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, models, transaction
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Cast
from django.utils import timezone

from agent.schema import MAX_WARNINGS, normalize_pci_bus_id, synthetic_uuid

from ..choices import ChangeKind, GpuStatus, ReportStatus, ServerState
from ..identity import normalize_machine_id, normalize_uuid
from ..models import (
    AgentToken,
    ChangeEvent,
    Disk,
    Gpu,
    GpuClaim,
    Guest,
    Link,
    MigDevice,
    Nic,
    Report,
    Server,
    server_state_at,
)
from .revision import revision_bump

logger = logging.getLogger(__name__)

SERVER_STRING_FIELDS = ("fqdn", "vendor", "product", "serial", "cpu_model", "os_name", "kernel")
SERVER_NUMBER_FIELDS = (
    "cpu_sockets",
    "cpu_cores",
    "cpu_threads",
    "memory_total_bytes",
    "numa_nodes",
)
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
NIC_TEXT_FIELDS = (
    "netdev",
    "kind",
    "mac",
    "state",
    "node_guid",
    "port_guid",
    "rate",
    "phys_state",
    "link_layer",
)
NIC_VALUE_FIELDS = ("numa_node", "speed_mbps", "port_number", "lid")
NIC_LIST_FIELDS = ("addresses", "port_guids", "lldp_neighbors")
DISK_TEXT_FIELDS = ("model", "serial", "transport", "pcie_link_speed")
DISK_VALUE_FIELDS = ("size_bytes", "rotational", "pcie_link_width", "numa_node")
PASSTHROUGH_DRIVERS = frozenset({"vfio-pci", "pci-stub"})


@dataclass
class ApplyResult:
    report_id: int
    status: str
    server_id: int | None = None
    created: bool = False
    gpus_changed: bool = False
    identity_changed: bool = False
    claims: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)


class _Events:
    """ChangeEvents gathered during one apply, written in one bulk insert."""

    def __init__(self, server: Server, report: Report, now) -> None:
        self.server, self.report, self.now = server, report, now
        self.rows: list[ChangeEvent] = []

    def add(self, kind: str, summary: str, *, gpu_id=None, before=None, after=None, server=None):
        self.rows.append(
            ChangeEvent(
                server=server or self.server,
                gpu_id=gpu_id,
                report=self.report,
                kind=kind,
                summary=summary[:500],
                before=before,
                after=after,
                created_at=self.now,
            )
        )


def report_apply(*, report_id: int) -> ApplyResult:
    """Apply one pending report. Applying twice is applying once."""
    with transaction.atomic():
        report = (
            Report.objects.select_for_update(of=("self",))
            .select_related("token")
            .filter(pk=report_id)
            .first()
        )
        if report is None:
            return ApplyResult(report_id=report_id, status="missing")
        if report.status != ReportStatus.PENDING:
            return ApplyResult(
                report_id=report_id, status=report.status, server_id=report.server_id
            )
        payload = report.payload
        now = timezone.now()
        server, created = _lock_server(report.identity, payload["host"], now)
        if not created and server.last_report_id and server.last_report_id > report.pk:
            Report.objects.filter(pk=report.pk).update(
                status=ReportStatus.SUPERSEDED, server=server, applied_at=now
            )
            return ApplyResult(
                report_id=report.pk, status=ReportStatus.SUPERSEDED, server_id=server.pk
            )

        events = _Events(server, report, now)
        result = ApplyResult(
            report_id=report.pk, status=ReportStatus.APPLIED, server_id=server.pk, created=created
        )
        # A partial report adds and updates what it describes and removes nothing it lacks.
        partial = bool(payload.get("partial"))
        result.identity_changed = _apply_host(server, payload, created, events, partial)
        gpu_ids, result.gpus_changed, claims = _apply_gpus(
            server, payload, created, now, events, partial
        )
        nic_ids = _apply_nics(server, payload.get("nics", []), partial)
        _apply_disks(server, payload.get("disks", []), partial)
        _apply_links(server, payload, gpu_ids, nic_ids, partial)
        guests_changed = _apply_guests(server, payload["host"], now, partial)
        claims_changed = _record_claims(server, claims, now, partial)
        if claims:
            # The PCI functions of GPUs kept by their holder are not this server's to miss.
            held = [g.get("pci_bus_id") for g in payload["gpus"] if g["uuid"] in claims.gpus]
            server.pci_gpu_count = _pci_gpu_count(server.pci_gpus or [], skip=held)
        if created:
            gpu_count = len(payload["gpus"])
            events.add(
                ChangeKind.SERVER_ADDED,
                f"{server.hostname} first reported, {gpu_count} GPUs",
                after={"gpus": gpu_count},
            )

        server.last_seen = now
        server.last_report = report
        server.last_report_partial = partial
        server.last_report_partial_reason = (
            _text(payload.get("partial_reason"))[:500] if partial else ""
        )
        # The hash marks what was applied; with claims held back that is not this report, so
        # its next copy is applied in full (and settles the claims) instead of a heartbeat.
        server.last_report_hash = "" if claims else report.content_hash
        server.placement_shape = ""  # its placement summary is of the facts before these
        server.save()
        ChangeEvent.objects.bulk_create(events.rows)
        Report.objects.filter(pk=report.pk).update(
            status=ReportStatus.APPLIED, server=server, applied_at=now, error=""
        )
        if report.token_id:
            AgentToken.objects.filter(pk=report.token_id).exclude(server=server).update(
                server=server
            )
        if (
            created
            or result.identity_changed
            or result.gpus_changed
            or guests_changed
            or claims_changed
            or events.rows
        ):
            revision_bump(name="inventory")
        result.claims = sorted(claims.uuids())
        result.events = [e.kind for e in events.rows]
        return result


def report_fail(*, report_id: int, error: str) -> None:
    """Mark a report that cannot be applied; it is kept for inspection."""
    Report.objects.filter(pk=report_id, status=ReportStatus.PENDING).update(
        status=ReportStatus.FAILED, error=error[:2000], applied_at=timezone.now()
    )


def _lock_server(identity: str, host: dict[str, Any], now) -> tuple[Server, bool]:
    server = Server.objects.select_for_update().filter(identity=identity).first()
    if server is not None:
        return server, False
    try:
        with transaction.atomic():
            server = Server.objects.create(
                identity=identity, hostname=host["hostname"], first_seen=now
            )
            return server, True
    except IntegrityError:
        # Another worker created it between our read and our insert: wait for its lock.
        return Server.objects.select_for_update().get(identity=identity), False


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _described(value: Any) -> bool:
    """Whether a reported value says something: a partial report's null, empty text or empty
    list (`nvidia-smi -L` has no bus id, memory or serial) keeps what is known."""
    return value is not None and value != "" and value != []


def _apply_host(
    server: Server, payload: dict[str, Any], created: bool, events: _Events, partial: bool
) -> bool:
    """Copy host facts (a partial report only those it describes); return whether names or
    addresses that bind nodes changed."""
    host = payload["host"]
    before_names = (
        server.hostname,
        server.fqdn,
        server.system_uuid,
        server.machine_id,
        sorted(server.addresses or []),
    )

    def put(name: str, value: Any) -> None:
        if not partial or _described(value):
            setattr(server, name, value)

    server.hostname = host["hostname"]
    put("system_uuid", normalize_uuid(host.get("system_uuid")))
    put("machine_id", normalize_machine_id(host.get("machine_id")))
    put("addresses", list(host.get("addresses") or []))
    for name in SERVER_STRING_FIELDS:
        put(name, _text(host.get(name)))
    old_memory = server.memory_total_bytes
    for name in SERVER_NUMBER_FIELDS:
        put(name, host.get(name))
    virt = host.get("virtualization")
    if not partial or virt:
        virt = virt or {}
        server.is_virtual = bool(virt.get("is_virtual"))
        server.hypervisor = _text(virt.get("hypervisor"))

    driver = payload.get("driver") or {}
    old_driver = server.driver_version
    put("driver_version", _text(driver.get("driver_version")))
    put("cuda_version", _text(driver.get("cuda_version")))
    put("nvml_version", _text(driver.get("nvml_version")))
    server.nvml_error = _text(payload.get("nvml_error"))  # of this report's collection
    server.agent_version = payload["agent"]["version"]
    server.agent_source = payload["agent"]["source"]
    put("nvswitch_count", payload.get("nvswitch_count"))
    warnings = list(payload.get("warnings") or [])
    if partial:  # it may not see what a full report warned of: both, its own first
        warnings = list(dict.fromkeys([*warnings, *(server.warnings or [])]))[:MAX_WARNINGS]
    server.warnings = warnings
    pci_gpus = payload.get("pci_gpus") or []
    if partial:
        pci_gpus = _merged_pci_gpus(server.pci_gpus or [], pci_gpus)
    server.pci_gpus = pci_gpus
    server.pci_gpu_count = _pci_gpu_count(pci_gpus)

    if not created:
        if old_driver and server.driver_version and old_driver != server.driver_version:
            events.add(
                ChangeKind.DRIVER_UPGRADE,
                f"NVIDIA driver {old_driver} → {server.driver_version}",
                before={"driver_version": old_driver},
                after={"driver_version": server.driver_version},
            )
        if old_memory and server.memory_total_bytes and old_memory != server.memory_total_bytes:
            events.add(
                ChangeKind.MEMORY_CHANGE,
                f"memory {old_memory // 2**30} GiB → {server.memory_total_bytes // 2**30} GiB",
                before={"memory_total_bytes": old_memory},
                after={"memory_total_bytes": server.memory_total_bytes},
            )
    after_names = (
        server.hostname,
        server.fqdn,
        server.system_uuid,
        server.machine_id,
        sorted(server.addresses),
    )
    return created or before_names != after_names


def _merged_pci_gpus(known: list[dict], reported: list[dict]) -> list[dict]:
    """A partial report's PCI listing over the known one: its functions replace those at
    their address, the others stay (in bus order)."""
    if not reported:
        return known
    by_bus = {normalize_pci_bus_id(p.get("pci_bus_id")) or "": p for p in known}
    by_bus.update({normalize_pci_bus_id(p.get("pci_bus_id")) or "": p for p in reported})
    return [by_bus[bus] for bus in sorted(by_bus)]


def _pci_gpu_count(pci_gpus: list[dict], skip: Iterable[str | None] = ()) -> int | None:
    """GPUs on the PCI bus not passed through to a VM (None: the report has no PCI listing)."""
    if not pci_gpus:
        return None
    skipped = {normalize_pci_bus_id(s) for s in skip} - {None}
    return sum(
        1
        for p in pci_gpus
        if p.get("driver") not in PASSTHROUGH_DRIVERS
        and normalize_pci_bus_id(p.get("pci_bus_id")) not in skipped
    )


def _offline(last_seen, now) -> bool:
    return server_state_at(last_seen, now) in (ServerState.OFFLINE, ServerState.NEVER)


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


def _replace_by_name(
    model, server: Server, items: list[dict], fields: dict, partial: bool = False
) -> bool:
    """Make `model`'s rows of the server exactly `items`, by name: delete the gone, upsert the
    rest (two queries whatever the count). `fields` maps each column to how it is read from an
    item. Returns whether anything is left to upsert.

    A partial report deletes nothing, and what its items leave null or empty keeps the known
    row's value (one read of those rows instead of the delete)."""
    known: dict[str, dict[str, Any]] = {}
    if not partial:
        model.objects.filter(server=server).exclude(name__in=[i["name"] for i in items]).delete()
    elif items:
        known = {
            row["name"]: row
            for row in model.objects.filter(
                server=server, name__in=[i["name"] for i in items]
            ).values("name", *fields)
        }
    if not items:
        return False

    def columns(item: dict) -> dict[str, Any]:
        values = {f: read(item) for f, read in fields.items()}
        old = known.get(item["name"])
        if old is not None:
            values.update({f: old[f] for f, v in values.items() if not _described(v)})
        return values

    model.objects.bulk_create(
        [model(server=server, name=item["name"], **columns(item)) for item in items],
        update_conflicts=True,
        unique_fields=["server", "name"],
        update_fields=list(fields),
    )
    return True


def _pci(item: dict) -> str:
    return normalize_pci_bus_id(item.get("pci_bus_id")) or ""


def _columns(text: tuple, value: tuple = (), lists: tuple = ()) -> dict:
    """How each column is read from a reported item: text cleaned, values kept, lists copied."""
    return {
        "pci_bus_id": _pci,
        **{f: (lambda item, f=f: _text(item.get(f))) for f in text},
        **{f: (lambda item, f=f: item.get(f)) for f in value},
        **{f: (lambda item, f=f: list(item.get(f) or [])) for f in lists},
    }


def _apply_nics(server: Server, nics: list[dict], partial: bool = False) -> dict[str, int]:
    """Replace the server's NICs by name: host facts, InfiniBand identity, LLDP neighbours.
    Three queries whatever the count (delete the gone, upsert, read the ids); a partial
    report's NICs are added and updated, none removed."""
    columns = _columns(NIC_TEXT_FIELDS, NIC_VALUE_FIELDS, NIC_LIST_FIELDS)
    if not _replace_by_name(Nic, server, nics, columns, partial):
        return {}
    return dict(Nic.objects.filter(server=server).values_list("name", "id"))


def _apply_disks(server: Server, disks: list[dict], partial: bool = False) -> None:
    """Replace the server's disks by kernel name; two queries whatever the count."""
    columns = _columns(DISK_TEXT_FIELDS, DISK_VALUE_FIELDS)
    _replace_by_name(Disk, server, disks, columns, partial)


LINK_ENDS = ("gpu_a_id", "gpu_b_id", "nic_id", "nic_a_id", "nic_b_id")


def _link_ends(link: Link) -> tuple:
    return tuple(getattr(link, end) for end in LINK_ENDS)


def _apply_links(
    server: Server,
    payload: dict[str, Any],
    gpu_ids: dict[int, int],
    nic_ids: dict[str, int],
    partial: bool = False,
) -> None:
    """Replace the server's links: each GPU pair once (lower index first), each GPU-NIC pair,
    and each NIC pair (lower name first; PIX says the two NICs share a PCIe switch).

    Two queries whatever the count (delete, insert). A partial report replaces only the
    pairs it lists: a read of the server's links, the delete of those, the insert."""
    seen: set[tuple] = set()
    rows = []
    for link in payload.get("links", []):
        ends = sorted((link["a"], link["b"]), key=lambda e: (not e.startswith("gpu:"), _end_key(e)))
        a_kind, _, a_ref = ends[0].partition(":")
        b_kind, _, b_ref = ends[1].partition(":")
        key = (ends[0], ends[1])
        if key in seen:
            continue
        seen.add(key)
        cls = link["link_class"]
        if a_kind == "nic":
            if a_ref not in nic_ids or b_ref not in nic_ids:
                continue
            rows.append(
                Link(
                    server=server,
                    nic_a_id=nic_ids[a_ref],
                    nic_b_id=nic_ids[b_ref],
                    link_class=cls,
                    nvlink_count=None,
                )
            )
            continue
        if int(a_ref) not in gpu_ids or (b_kind == "gpu" and int(b_ref) not in gpu_ids):
            continue  # a GPU another server keeps: not this server's to link
        rows.append(
            Link(
                server=server,
                gpu_a_id=gpu_ids[int(a_ref)],
                gpu_b_id=gpu_ids[int(b_ref)] if b_kind == "gpu" else None,
                nic_id=nic_ids[b_ref] if b_kind == "nic" else None,
                link_class=cls,
                nvlink_count=int(cls[2:]) if cls.startswith("NV") else None,
            )
        )
    if not partial:
        Link.objects.filter(server=server).delete()
    elif rows:
        listed = {_link_ends(r) for r in rows}
        stale = [
            pk
            for pk, *ends in Link.objects.filter(server=server).values_list("id", *LINK_ENDS)
            if tuple(ends) in listed
        ]
        if stale:
            Link.objects.filter(pk__in=stale).delete()
    if rows:
        Link.objects.bulk_create(rows)


def _end_key(end: str):
    kind, _, ref = end.partition(":")
    return int(ref) if kind == "gpu" else ref


@dataclass(frozen=True)
class GuestClaim:
    """One host's report listing a VM's UUID: the host, whether the VM runs there, and
    whether the host is live (not offline)."""

    host_id: int
    running: bool
    live: bool


def vm_host_for(current: int | None, claims: Sequence[GuestClaim]) -> int | None:
    """The host a VM's server hangs under, among the hosts whose reports list its UUID.

    A live host beats an offline one, and a host where it runs beats one where it is only
    defined (libvirt lists shut-off domains too, and after a migration both hosts may list
    it). The current host keeps the VM while it is among the best, so another report naming
    the same UUID cannot take a VM from a live host that still runs it. None: no host lists it.
    """
    pool = [c for c in claims if c.live] or list(claims)
    pool = [c for c in pool if c.running] or pool
    hosts = {c.host_id for c in pool}
    if current in hosts:
        return current
    return min(hosts) if hosts else None


def _apply_guests(server: Server, host: dict[str, Any], now, partial: bool = False) -> bool:
    """Replace the guests this host lists; re-link the VMs they name, and this VM to its host.

    Only a server whose own report says it is virtual hangs under a host (its SMBIOS UUID is
    the guest's UUID); a physical server never does. Returns whether a VM-to-host link
    changed (failure domains and figures follow them). A partial report adds and updates
    the guests it lists and keeps the others.
    """
    guests: dict[str, dict] = {}
    for g in host.get("guests") or []:
        guests.setdefault(normalize_uuid(g["uuid"]) or g["uuid"].strip().lower(), g)
    changed = False
    if guests or (not partial and Guest.objects.filter(host=server).exists()):
        kept = Guest.objects.filter(host=server)
        (kept.filter(uuid__in=list(guests)) if partial else kept).delete()
        Guest.objects.bulk_create(
            Guest(host=server, uuid=uuid, name=_text(g.get("name")), state=_text(g.get("state")))
            for uuid, g in guests.items()
        )
        changed = _relink_vms(server, list(guests), now)
    if not server.physical_host_manual:
        before = server.physical_host_id
        if server.is_virtual and server.system_uuid:
            claims = _guest_claims([server.system_uuid], now).get(server.system_uuid, [])
            own = [c for c in claims if c.host_id != server.pk]
            server.physical_host_id = vm_host_for(server.physical_host_id, own)
        else:
            server.physical_host_id = None  # its own report says it is physical
        changed = changed or server.physical_host_id != before
    return changed


def _guest_claims(uuids: Iterable[str], now) -> dict[str, list[GuestClaim]]:
    claims: dict[str, list[GuestClaim]] = {}
    uuids = list(uuids)
    if not uuids:
        return claims
    for row in Guest.objects.filter(uuid__in=uuids).values(
        "uuid", "host_id", "state", host_seen=F("host__last_seen")
    ):
        claims.setdefault(row["uuid"], []).append(
            GuestClaim(
                host_id=row["host_id"],
                running=row["state"] == "running",
                live=not _offline(row["host_seen"], now),
            )
        )
    return claims


def _relink_vms(server: Server, uuids: list[str], now) -> bool:
    """Re-decide the host of every VM this host lists or held: two reads (the VMs, the hosts
    that list them), and one UPDATE when a VM moves."""
    vms = list(
        Server.objects.filter(Q(system_uuid__in=uuids) | Q(physical_host=server))
        .filter(physical_host_manual=False)
        .exclude(pk=server.pk)
        .values("id", "system_uuid", "is_virtual", "physical_host_id")
    )
    guest_uuids = {u for vm in vms if vm["is_virtual"] and (u := vm["system_uuid"]) is not None}
    claims = _guest_claims(guest_uuids, now)
    moves: dict[int, int | None] = {}
    for vm in vms:
        new = None
        if vm["is_virtual"] and vm["system_uuid"]:
            own = [c for c in claims.get(vm["system_uuid"], []) if c.host_id != vm["id"]]
            new = vm_host_for(vm["physical_host_id"], own)
        if new != vm["physical_host_id"]:
            moves[vm["id"]] = new
    if moves:
        Server.objects.filter(pk__in=moves).update(
            physical_host_id=Case(
                *(
                    When(pk=pk, then=Cast(Value(host_id), models.BigIntegerField()))
                    for pk, host_id in moves.items()
                ),
                output_field=models.BigIntegerField(null=True),
            )
        )
    return bool(moves)


def _onoff(value) -> str:
    return {True: "on", False: "off"}.get(value, "unknown")


def _profiles(layout: list[list]) -> str:
    return ", ".join(p[0] or "?" for p in layout) or "none"
