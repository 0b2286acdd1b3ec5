"""Applying a stored report to the inventory: one transaction, idempotent, bulk.

The cost is a fixed number of queries whatever the GPU count. Two reports of one server
applied at once serialise on the server's row lock (and the unique identity), so they never
duplicate rows; a report older than the last one applied is marked superseded.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from agent.schema import normalize_pci_bus_id

from ..choices import ChangeKind, GpuStatus, ReportStatus
from ..identity import normalize_machine_id, normalize_uuid
from ..models import AgentToken, ChangeEvent, Gpu, Guest, Link, MigDevice, Nic, Report, Server
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
NIC_FIELDS = ("netdev", "kind", "mac", "numa_node", "speed_mbps", "state")
PASSTHROUGH_DRIVERS = frozenset({"vfio-pci", "pci-stub"})


@dataclass
class ApplyResult:
    report_id: int
    status: str
    server_id: int | None = None
    created: bool = False
    gpus_changed: bool = False
    identity_changed: bool = False
    events: list[str] = field(default_factory=list)


class _Events:
    """ChangeEvents gathered during one apply, written in one bulk insert."""

    def __init__(self, server: Server, report: Report, now) -> None:
        self.server, self.report, self.now, self.rows = server, report, now, []

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
        result.identity_changed = _apply_host(server, payload, created, events)
        gpu_ids, result.gpus_changed = _apply_gpus(server, payload, created, now, events)
        nic_ids = _apply_nics(server, payload.get("nics", []))
        _apply_links(server, payload, gpu_ids, nic_ids)
        _apply_guests(server, payload["host"])
        if created:
            gpu_count = len(payload["gpus"])
            events.add(
                ChangeKind.SERVER_ADDED,
                f"{server.hostname} first reported, {gpu_count} GPUs",
                after={"gpus": gpu_count},
            )

        server.last_seen = now
        server.last_report = report
        server.last_report_hash = report.content_hash
        server.save()
        ChangeEvent.objects.bulk_create(events.rows)
        Report.objects.filter(pk=report.pk).update(
            status=ReportStatus.APPLIED, server=server, applied_at=now, error=""
        )
        if report.token_id:
            AgentToken.objects.filter(pk=report.token_id).exclude(server=server).update(
                server=server
            )
        if created or result.identity_changed or result.gpus_changed or events.rows:
            revision_bump(name="inventory")
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


def _apply_host(server: Server, payload: dict[str, Any], created: bool, events: _Events) -> bool:
    """Copy host facts; return whether names/addresses that bind nodes changed."""
    host = payload["host"]
    before_names = (
        server.hostname,
        server.fqdn,
        server.system_uuid,
        server.machine_id,
        sorted(server.addresses or []),
    )
    server.hostname = host["hostname"]
    server.system_uuid = normalize_uuid(host.get("system_uuid"))
    server.machine_id = normalize_machine_id(host.get("machine_id"))
    server.addresses = list(host.get("addresses") or [])
    for name in SERVER_STRING_FIELDS:
        setattr(server, name, _text(host.get(name)))
    old_memory = server.memory_total_bytes
    for name in SERVER_NUMBER_FIELDS:
        setattr(server, name, host.get(name))
    virt = host.get("virtualization") or {}
    server.is_virtual = bool(virt.get("is_virtual"))
    server.hypervisor = _text(virt.get("hypervisor"))

    driver = payload.get("driver") or {}
    old_driver = server.driver_version
    server.driver_version = _text(driver.get("driver_version"))
    server.cuda_version = _text(driver.get("cuda_version"))
    server.nvml_version = _text(driver.get("nvml_version"))
    server.nvml_error = _text(payload.get("nvml_error"))
    server.agent_version = payload["agent"]["version"]
    server.agent_source = payload["agent"]["source"]
    server.nvswitch_count = payload.get("nvswitch_count")
    server.warnings = list(payload.get("warnings") or [])
    pci_gpus = payload.get("pci_gpus") or []
    server.pci_gpus = pci_gpus
    server.pci_gpu_count = (
        sum(1 for p in pci_gpus if p.get("driver") not in PASSTHROUGH_DRIVERS) if pci_gpus else None
    )

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


def _gpu_fields(gpu: dict[str, Any]) -> dict[str, Any]:
    fields = {name: _text(gpu.get(name)) for name in GPU_STRING_FIELDS}
    fields.update({name: gpu.get(name) for name in GPU_VALUE_FIELDS})
    fields["index"] = gpu["index"]
    fields["uuid_synthetic"] = bool(gpu.get("uuid_synthetic"))
    fields["status"] = GpuStatus.ERROR if gpu.get("status") == "error" else GpuStatus.OK
    fields["pci_bus_id"] = normalize_pci_bus_id(gpu.get("pci_bus_id")) or ""
    fields["nvlinks"] = gpu.get("nvlinks") or []
    return fields


def _mig_layout(devices) -> list[list]:
    return sorted(
        [d["profile"] or "", d["gpu_instance_id"], d["compute_instance_id"]] for d in devices
    )


def _apply_gpus(
    server: Server, payload: dict[str, Any], created: bool, now, events: _Events
) -> tuple[dict[int, int], bool]:
    """Upsert GPUs by UUID and their MIG devices; mark the missing ones lost.

    Returns report GPU index -> row id, and whether the set of GPUs or MIG devices changed.
    """
    reported = payload["gpus"]
    existing = {g.uuid: g for g in Gpu.objects.filter(server=server)}
    existing_mig: dict[int, list[dict]] = {}
    for row in MigDevice.objects.filter(gpu__server=server).values(
        "gpu_id", "uuid", "profile", "gpu_instance_id", "compute_instance_id"
    ):
        existing_mig.setdefault(row["gpu_id"], []).append(row)
    reported_uuids = [g["uuid"] for g in reported]
    moved_in = {
        row["uuid"]: row
        for row in Gpu.objects.filter(uuid__in=reported_uuids)
        .exclude(server=server)
        .values("uuid", "id", "server_id", "server__hostname", "serial")
    }

    changed = False
    rows = []
    for gpu in reported:
        fields = _gpu_fields(gpu)
        old = existing.get(gpu["uuid"])
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
            before = _mig_layout(existing_mig.get(old.pk, []))
            after = _mig_layout(gpu.get("mig_devices", []))
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
            replaced = next(
                (
                    g
                    for g in existing.values()
                    if fields["pci_bus_id"]
                    and g.pci_bus_id == fields["pci_bus_id"]
                    and g.uuid not in reported_uuids
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
        if event.kind == ChangeKind.GPU_ADDED and event.gpu_id is None:
            event.gpu_id = ids.get(event.after["uuid"])

    lost = [g for g in existing.values() if g.uuid not in ids and g.status != GpuStatus.LOST]
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

    _apply_mig_devices(server, reported, ids)
    return index_to_id, changed


def _apply_mig_devices(server: Server, reported: list[dict], gpu_ids: dict[str, int]) -> None:
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
    ]
    MigDevice.objects.filter(gpu__server=server).exclude(uuid__in=[r.uuid for r in rows]).delete()
    if rows:
        MigDevice.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["uuid"],
            update_fields=["gpu", "uuid_synthetic", "profile", *MIG_FIELDS],
        )


def _apply_nics(server: Server, nics: list[dict]) -> dict[str, int]:
    names = [n["name"] for n in nics]
    Nic.objects.filter(server=server).exclude(name__in=names).delete()
    if not nics:
        return {}
    rows = [
        Nic(
            server=server,
            name=n["name"],
            pci_bus_id=normalize_pci_bus_id(n.get("pci_bus_id")) or "",
            addresses=list(n.get("addresses") or []),
            **{
                name: (n.get(name) if name in ("numa_node", "speed_mbps") else _text(n.get(name)))
                for name in NIC_FIELDS
            },
        )
        for n in nics
    ]
    Nic.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["server", "name"],
        update_fields=["pci_bus_id", "addresses", *NIC_FIELDS],
    )
    return dict(Nic.objects.filter(server=server).values_list("name", "id"))


def _apply_links(
    server: Server, payload: dict[str, Any], gpu_ids: dict[int, int], nic_ids: dict[str, int]
) -> None:
    """Replace the server's links; each GPU pair once (lower index first), NIC-NIC dropped."""
    Link.objects.filter(server=server).delete()
    seen: set[tuple] = set()
    rows = []
    for link in payload.get("links", []):
        ends = sorted((link["a"], link["b"]), key=lambda e: (not e.startswith("gpu:"), _end_key(e)))
        a_kind, _, a_ref = ends[0].partition(":")
        b_kind, _, b_ref = ends[1].partition(":")
        if a_kind != "gpu":
            continue
        key = (ends[0], ends[1])
        if key in seen:
            continue
        seen.add(key)
        cls = link["link_class"]
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
    if rows:
        Link.objects.bulk_create(rows)


def _end_key(end: str):
    kind, _, ref = end.partition(":")
    return int(ref) if kind == "gpu" else ref


def _apply_guests(server: Server, host: dict[str, Any]) -> None:
    """Link VMs to this host by the guest UUIDs it lists, and this VM to its host."""
    guests = host.get("guests") or []
    if guests or Guest.objects.filter(host=server).exists():
        Guest.objects.filter(host=server).delete()
        rows = [
            Guest(
                host=server,
                uuid=normalize_uuid(g["uuid"]) or g["uuid"].lower(),
                name=_text(g.get("name")),
                state=_text(g.get("state")),
            )
            for g in guests
        ]
        Guest.objects.bulk_create(rows)
        uuids = [r.uuid for r in rows]
        Server.objects.filter(system_uuid__in=uuids, physical_host_manual=False).exclude(
            physical_host=server
        ).update(physical_host=server)
    if server.is_virtual and server.system_uuid and not server.physical_host_manual:
        host_id = (
            Guest.objects.filter(uuid=server.system_uuid)
            .exclude(host=server)
            .values_list("host_id", flat=True)
            .first()
        )
        server.physical_host_id = host_id


def _onoff(value) -> str:
    return {True: "on", False: "off"}.get(value, "unknown")


def _profiles(layout: list[list]) -> str:
    return ", ".join(p[0] or "?" for p in layout) or "none"
