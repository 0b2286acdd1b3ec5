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

This module holds the transaction and the server's own row; the parts are written, inside
it, by `gpus.py` (GPUs, MIG devices, claims) and `host_parts.py` (NICs, disks, links,
guests), with what they share in `applying.py` (the change events, value helpers).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from agent.schema import MAX_WARNINGS, normalize_pci_bus_id

from ..choices import ChangeKind, ReportStatus
from ..identity import normalize_machine_id, normalize_uuid
from ..models import AgentToken, ChangeEvent, Report, Server
from .applying import PASSTHROUGH_DRIVERS, _described, _Events, _text
from .gpus import _apply_gpus, _record_claims
from .host_parts import _apply_disks, _apply_guests, _apply_links, _apply_nics
from .revision import revision_bump

SERVER_STRING_FIELDS = ("fqdn", "vendor", "product", "serial", "cpu_model", "os_name", "kernel")
SERVER_NUMBER_FIELDS = (
    "cpu_sockets",
    "cpu_cores",
    "cpu_threads",
    "memory_total_bytes",
    "numa_nodes",
)


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
        server.declared_kubernetes_node,
        server.declared_slurm_node,
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
    # What the agent says it is to its schedulers; a full report without one stops declaring.
    put("declared_kubernetes_node", _text(host.get("kubernetes_node_name")))
    put("declared_slurm_node", _text(host.get("slurm_node_name")))
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
        server.declared_kubernetes_node,
        server.declared_slurm_node,
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
