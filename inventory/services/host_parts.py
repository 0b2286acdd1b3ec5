"""A report's NICs, disks, links and guests, inside `report_apply`'s transaction.

NICs and disks are replaced by name; links are keyed by their two ends; a guest UUID links
a VM only when the VM's own report says it is virtual, and never takes it from a live host
that still runs it (`vm_host_for`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import models
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Cast

from agent.schema import normalize_pci_bus_id

from ..identity import normalize_uuid
from ..models import Disk, Guest, Link, Nic, Server
from .applying import _described, _offline, _text

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
