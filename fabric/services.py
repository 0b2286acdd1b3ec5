"""Writes of the fabric layer: snapshots applied, node-name maps set, tiers overridden, and
the `ethernet` fabric built from the LLDP neighbours agents report (`ethernet_fabric_sync`).

Applying a snapshot is one transaction: read the fabric's rows once, work out in memory what
is new, changed and gone, and write that in bulk. The number of queries does not grow with
the fabric (only with rows written, in batches), and applying the same snapshot
twice changes nothing but `last_seen`. A snapshot that cannot be read leaves the fabric as
it was.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from core.db.statistics import analyze_after_commit
from inventory.models import Nic, Server
from inventory.services import revision_bump, revision_get

from . import binding, graph, lldp
from .bulk import insert_rows, update_rows
from .choices import FabricKind, LinkState, NodeKind, SnapshotStatus
from .graph import host_key
from .models import Adapter, Fabric, FabricLink, FabricSnapshot, Switch
from .parsers import SWITCH, Discovery, FabricFormatError, decode, parse_fabric, parse_node_name_map

logger = logging.getLogger(__name__)

ID_CHUNK = 10000


class FabricRejected(Exception):
    """Input the fabric cannot take; the fabric stays as it was. `field` is the one at fault."""

    def __init__(self, message: str, field: str = "body") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class SnapshotResult:
    fabric: str
    snapshot: int
    format: str
    switches: int
    adapters: int
    links_up: int
    ports_down: int
    added: int
    gone: int
    unbound: int


@dataclass(frozen=True)
class NameMapResult:
    fabric: str
    entries: int
    renamed: int
    bound: int
    unbound: int


def fabric_name_valid(name: str) -> bool:
    return bool(name) and slugify(name) == name and len(name) <= 100


def _check_name(name: str) -> None:
    if not fabric_name_valid(name):
        raise FabricRejected(
            "a fabric name is lower-case letters, digits, '-' and '_' (at most 100)", "name"
        )


def _check_not_ethernet(name: str) -> None:
    """An Ethernet fabric is what agents hear over LLDP: nothing is pushed to it."""
    if Fabric.objects.filter(name=name, kind=FabricKind.ETHERNET).exists():
        raise FabricRejected(
            f"fabric {name!r} is learnt from the servers' LLDP neighbours: push ibnetdiscover "
            "output and node-name maps to an InfiniBand fabric of another name",
            "name",
        )


# -- snapshots ---------------------------------------------------------------------------


def fabric_snapshot_ingest(*, fabric_name: str, raw: bytes | str) -> SnapshotResult:
    """Take a raw `ibnetdiscover` (or `-p`) output for a fabric; a new name creates it.

    Refused (FabricRejected) when it is not ibnetdiscover output, names no switch, or was
    cut short; a fabric that already exists records the refusal among its snapshots.
    """
    _check_name(fabric_name)
    _check_not_ethernet(fabric_name)
    data, discovery = _read_snapshot(fabric_name, raw)
    return _snapshot_apply(fabric_name, data, discovery)


def fabric_import(
    *, fabric_name: str, raw: bytes | str, node_name_map: bytes | str | None = None
) -> tuple[SnapshotResult, NameMapResult | None]:
    """`import_fabric`: a saved ibnetdiscover output, and the node-name map to name it by.

    Both are read before anything is written, and written in one transaction: a map or a
    capture that is refused (FabricRejected, `field` "node_name_map" or "body") changes
    nothing stored but the refused capture's own record among an existing fabric's
    snapshots, as a pushed one leaves.
    """
    _check_name(fabric_name)
    _check_not_ethernet(fabric_name)
    names = None
    if node_name_map is not None:
        try:
            names = _read_node_name_map(node_name_map)
        except FabricRejected as exc:
            raise FabricRejected(str(exc), "node_name_map") from None
    data, discovery = _read_snapshot(fabric_name, raw)
    with transaction.atomic():
        mapped = _node_name_map_apply(fabric_name, *names) if names is not None else None
        result = _snapshot_apply(fabric_name, data, discovery)
    return result, mapped


def _read_snapshot(fabric_name: str, raw: bytes | str) -> tuple[bytes, Discovery]:
    """The capture read whole, or FabricRejected (its refusal recorded on a known fabric)."""
    data = raw.encode() if isinstance(raw, str) else bytes(raw)
    try:
        return data, parse_fabric(data)
    except FabricFormatError as exc:
        _record_rejection(fabric_name, data, str(exc))
        raise FabricRejected(str(exc)) from None


def _snapshot_apply(fabric_name: str, data: bytes, discovery: Discovery) -> SnapshotResult:
    now = timezone.now()
    with transaction.atomic():
        fabric, _ = Fabric.objects.select_for_update().get_or_create(name=fabric_name)
        snapshot = FabricSnapshot.objects.create(
            fabric=fabric,
            format=discovery.format,
            status=SnapshotStatus.APPLIED,
            raw=data.decode("utf-8-sig"),
            size_bytes=len(data),
            content_hash=hashlib.sha256(data).hexdigest(),
            received_at=now,
        )
        added, gone = _apply(fabric, discovery, now)
        unbound, _ = _bind(fabric)
        _derive(fabric)
        up = sum(1 for link in discovery.links if link.up)
        switches = sum(1 for node in discovery.nodes.values() if node.kind == SWITCH)
        FabricSnapshot.objects.filter(pk=snapshot.pk).update(
            switch_count=switches,
            adapter_count=len(discovery.nodes) - switches,
            link_count=up,
            ports_down=len(discovery.links) - up,
            added=added,
            gone=gone,
        )
        Fabric.objects.filter(pk=fabric.pk).update(last_snapshot=snapshot, applied_at=now)
        _keep_recent_raw(fabric)
        revision_bump(name="fabric")
        _findings_after_commit(fabric)
    return SnapshotResult(
        fabric=fabric.name,
        snapshot=snapshot.pk,
        format=discovery.format,
        switches=switches,
        adapters=len(discovery.nodes) - switches,
        links_up=up,
        ports_down=len(discovery.links) - up,
        added=added,
        gone=gone,
        unbound=unbound,
    )


def _findings_after_commit(fabric: Fabric) -> None:
    """The fabric's findings follow what was just written, once it is committed."""
    from .tasks import findings_soon  # tasks import this module

    fabric_id = fabric.pk
    transaction.on_commit(lambda: findings_soon(fabric_id))


def _record_rejection(fabric_name: str, data: bytes, error: str) -> None:
    fabric = Fabric.objects.filter(name=fabric_name).first()
    if fabric is None:
        return  # a refused first snapshot creates nothing
    FabricSnapshot.objects.create(
        fabric=fabric,
        status=SnapshotStatus.REJECTED,
        error=error,
        raw=data.decode("utf-8", errors="replace").replace("\x00", "\ufffd"),  # kept as text
        size_bytes=len(data),
        content_hash=hashlib.sha256(data).hexdigest(),
    )
    _keep_recent_raw(fabric)


def _keep_recent_raw(fabric: Fabric) -> None:
    """Keep the raw text of the last ATLAS_FABRIC_SNAPSHOT_RETENTION snapshots only."""
    keep = settings.ATLAS_FABRIC_SNAPSHOT_RETENTION
    old = list(
        FabricSnapshot.objects.filter(fabric=fabric)
        .exclude(raw="")
        .order_by("-received_at", "-id")
        .values_list("id", flat=True)[keep:]
    )
    if old:
        FabricSnapshot.objects.filter(id__in=old).update(raw="")


def _apply(fabric: Fabric, discovery: Discovery, now) -> tuple[int, int]:
    """Upsert switches, adapters and cables; mark the absent gone. (added, gone) counts."""
    names: dict[str, str] = fabric.node_names or {}
    switch_systems = {
        n.system_guid for n in discovery.nodes.values() if n.kind == SWITCH and n.system_guid
    }
    switch_rows: dict[str, dict[str, Any]] = {}
    adapter_rows: dict[str, dict[str, Any]] = {}
    for node in discovery.nodes.values():
        if node.kind == SWITCH:
            switch_rows[node.guid] = {
                "description": node.description[:256],
                "name": binding.switch_name_of(node.description, names.get(node.guid))[:256],
                "lid": node.lid,
                "system_guid": node.system_guid or "",
                "port_count": node.port_count,
            }
        else:
            adapter_rows[node.guid] = {
                "kind": NodeKind.ROUTER if node.kind == "router" else NodeKind.CA,
                "role": binding.adapter_role(
                    node.kind, node.description, node.system_guid, switch_systems
                ),
                "node_guid_known": node.node_guid_known,
                "description": node.description[:256],
                "system_guid": node.system_guid or "",
                "port_count": node.port_count,
                "port_guids": [node.port_guids[p] for p in sorted(node.port_guids)],
            }
    added = gone = 0
    switch_ids, a, g = _upsert(Switch, fabric, switch_rows, now)
    added, gone = added + a, gone + g
    adapter_ids, a, g = _upsert(Adapter, fabric, adapter_rows, now)
    added, gone = added + a, gone + g

    link_rows: dict[str, dict[str, Any]] = {}
    for link in discovery.links:
        row: dict[str, Any] = {
            "a_switch_id": switch_ids.get(link.a_guid),
            "a_adapter_id": adapter_ids.get(link.a_guid),
            "a_port": link.a_port,
            "a_lid": link.a_lid,
            "b_switch_id": switch_ids.get(link.b_guid) if link.b_guid else None,
            "b_adapter_id": adapter_ids.get(link.b_guid) if link.b_guid else None,
            "b_port": link.b_port,
            "b_lid": link.b_lid,
            "width": link.width,
            "lane_speed": link.speed,
            "gbps": link.gbps,
            "state": LinkState.UP if link.up else LinkState.DOWN,
        }
        link_rows[link.key] = row
    _, a, g = _upsert(FabricLink, fabric, link_rows, now, key="key", want_ids=False)
    return added + a, gone + g


def _upsert(
    model,
    fabric: Fabric,
    rows: dict[str, dict[str, Any]],
    now,
    key: str = "guid",
    want_ids: bool = True,
):
    """Create, update (only what changed, and the revived) and mark gone, set-wise.

    Returns ({key: id} of live rows, empty unless `want_ids`; added, gone).
    """
    fields = list(next(iter(rows.values())).keys()) if rows else []
    existing = {
        values[0]: values
        for values in model.objects.filter(fabric=fabric).values_list(key, "id", "gone_at", *fields)
    }
    to_create, to_update = [], []
    for row_key, row in rows.items():
        known = existing.get(row_key)
        if known is None:
            to_create.append(
                {"fabric_id": fabric.pk, "first_seen": now, "last_seen": now, key: row_key, **row}
            )
            continue
        current = dict(zip(fields, known[3:], strict=True))
        if known[2] is not None or current != row:
            to_update.append(model(id=known[1], gone_at=None, last_seen=now, **row))
    insert_rows(model, to_create)
    if to_update:
        update_rows(model, to_update, ["gone_at", "last_seen", *fields])
    vanished = [v[1] for k, v in existing.items() if v[2] is None and k not in rows]
    for start in range(0, len(vanished), ID_CHUNK):
        model.objects.filter(id__in=vanished[start : start + ID_CHUNK]).update(gone_at=now)
    # Only the rows neither created nor updated above: those carry `now` already (on a first
    # import, every row; rewriting them all would write the fabric twice).
    model.objects.filter(fabric=fabric, gone_at__isnull=True).exclude(last_seen=now).update(
        last_seen=now
    )
    analyze_after_commit(
        model, changed=len(to_create) + len(to_update) + len(vanished), total=len(existing)
    )
    if not want_ids:
        return {}, len(to_create), len(vanished)
    ids = dict(model.objects.filter(fabric=fabric, gone_at__isnull=True).values_list(key, "id"))
    return ids, len(to_create), len(vanished)


# -- names and bindings -------------------------------------------------------------------


def agent_guid_servers(fabric: Fabric) -> dict[str, int]:
    """Node or port GUID -> server id, from what agents report of their InfiniBand NICs
    (/sys/class/infiniband): the first binding step. One query over the NICs that carry a
    GUID, whatever the fabric; a GUID two servers report binds neither."""
    rows = (
        Nic.objects.exclude(node_guid="")
        .values_list("server_id", "node_guid", "port_guids")
        .iterator(chunk_size=5000)
    )
    return binding.server_guid_index(
        (server_id, node_guid, [g for g in port_guids or [] if isinstance(g, str)])
        for server_id, node_guid, port_guids in rows
    )


def _bind(fabric: Fabric) -> tuple[int, int]:
    """Set every live adapter's host name, NIC label and server: (left unbound, changed)."""
    servers_by_name = binding.server_name_index(
        Server.objects.values_list("id", "hostname", "fqdn").iterator(chunk_size=5000)
    )
    servers_by_guid = agent_guid_servers(fabric)
    names = fabric.node_names or {}
    fields = ["host_name", "nic", "server_id", "binding_method"]
    changed, unbound = [], 0
    rows = Adapter.objects.filter(fabric=fabric, gone_at__isnull=True).values_list(
        "id", "guid", "port_guids", "description", "role", *fields
    )
    for adapter_id, guid, port_guids, description, role, *current in rows:
        found = binding.bind_adapter(
            binding.AdapterIdentity(guid, tuple(port_guids), description, role),
            servers_by_guid=servers_by_guid,
            mapped_names=names,
            servers_by_name=servers_by_name,
        )
        mapped = names.get(guid) or next((names[p] for p in port_guids if p in names), "")
        nic = binding.nic_label_of(mapped or description)
        wanted = [found.host_name, nic[:64], found.server_id, found.method]
        if role == binding.HOST and found.server_id is None:
            unbound += 1
        if wanted != current:
            changed.append(Adapter(id=adapter_id, **dict(zip(fields, wanted, strict=True))))
    update_rows(Adapter, changed, ["host_name", "nic", "server", "binding_method"])
    return unbound, len(changed)


def fabric_rebind(*, fabric: Fabric) -> int:
    """Bind the fabric's adapters again (servers came or went); the count left unbound.
    Derived facts (rails, leaf groups) are worked out again only when a binding changed.
    An Ethernet fabric's NICs are bound by the agents that heard them: nothing to do."""
    if fabric.kind == FabricKind.ETHERNET:
        return 0
    with transaction.atomic():
        unbound, changed = _bind(fabric)
        if changed:
            _derive(fabric)
            revision_bump(name="fabric")
            _findings_after_commit(fabric)
    return unbound


def node_name_map_set(*, fabric_name: str, raw: bytes | str) -> NameMapResult:
    """Set a fabric's node-name map (ibnetdiscover's format); it names and binds the
    fabric's switches and adapters from now on, those seen before included."""
    _check_name(fabric_name)
    _check_not_ethernet(fabric_name)
    return _node_name_map_apply(fabric_name, *_read_node_name_map(raw))


def _read_node_name_map(raw: bytes | str) -> tuple[str, dict[str, str]]:
    """The map's text and its names, or FabricRejected naming the line at fault."""
    try:
        text = decode(raw)
        return text, parse_node_name_map(text)
    except FabricFormatError as exc:
        raise FabricRejected(str(exc)) from None


def _node_name_map_apply(fabric_name: str, text: str, names: dict[str, str]) -> NameMapResult:
    now = timezone.now()
    with transaction.atomic():
        fabric, _ = Fabric.objects.select_for_update().get_or_create(name=fabric_name)
        fabric.node_name_map, fabric.node_names, fabric.node_name_map_updated_at = text, names, now
        fabric.save(update_fields=["node_name_map", "node_names", "node_name_map_updated_at"])
        renamed = []
        for switch_id, guid, description, name in Switch.objects.filter(fabric=fabric).values_list(
            "id", "guid", "description", "name"
        ):
            wanted = binding.switch_name_of(description, names.get(guid))[:256]
            if wanted != name:
                renamed.append(Switch(id=switch_id, name=wanted))
        update_rows(Switch, renamed, ["name"])
        unbound, _ = _bind(fabric)
        _derive(fabric)
        bound = Adapter.objects.filter(fabric=fabric, server__isnull=False).count()
        revision_bump(name="fabric")
        _findings_after_commit(fabric)
    return NameMapResult(
        fabric=fabric.name, entries=len(names), renamed=len(renamed), bound=bound, unbound=unbound
    )


def switch_tier_set(*, switch: Switch, tier: int | None) -> Switch:
    """A person's tier for a switch (None: back to the inferred one); tiers are derived again."""
    with transaction.atomic():
        Switch.objects.filter(pk=switch.pk).update(tier_override=tier)
        fabric = Fabric.objects.select_for_update().get(pk=switch.fabric_id)
        _derive(fabric)
        revision_bump(name="fabric")
        _findings_after_commit(fabric)
    return Switch.objects.get(pk=switch.pk)


# -- derived facts ------------------------------------------------------------------------


def _derive(fabric: Fabric, **more: Any) -> None:
    """Tiers, rails, leaf groups, ports used and bandwidth of every live switch; the fabric's
    summary of them, with `more` in it."""
    switches = {
        row[0]: row
        for row in Switch.objects.filter(fabric=fabric, gone_at__isnull=True).values_list(
            "id",
            "name",
            "tier_override",
            "tier_inferred",
            "rail",
            "leaf_group",
            "ports_used",
            "down_gbps",
            "up_gbps",
        )
    }
    adapters = {
        row[0]: row
        for row in Adapter.objects.filter(fabric=fabric, gone_at__isnull=True).values_list(
            "id", "role", "server_id", "host_name", "nic", "rail", "nic_rail"
        )
    }
    links = FabricLink.objects.filter(
        fabric=fabric, gone_at__isnull=True, state=LinkState.UP
    ).values_list("a_switch_id", "a_adapter_id", "b_switch_id", "b_adapter_id", "gbps")
    switch_links: list[tuple[int, int, float | None]] = []
    ports: list[graph.HostPort] = []
    adapter_links: list[tuple[int, float | None]] = []
    used: Counter[int] = Counter()
    hosts_on: Counter[int] = Counter()
    for a_switch, _a_adapter, b_switch, b_adapter, gbps in links:
        for end in (a_switch, b_switch):
            if end is not None:
                used[end] += 1
        if a_switch is not None and b_switch is not None:
            switch_links.append((a_switch, b_switch, gbps))
        elif a_switch is not None and b_adapter is not None:
            _, role, server_id, host_name, nic, _rail, _nic_rail = adapters[b_adapter]
            if role != binding.HOST:
                continue
            hosts_on[a_switch] += 1
            adapter_links.append((a_switch, gbps))
            ports.append(
                graph.HostPort(
                    adapter=str(b_adapter),
                    host=host_key(server_id, host_name),
                    nic=nic,
                    switch=str(a_switch),
                    gbps=gbps,
                )
            )
    overrides = {sid: row[2] for sid, row in switches.items() if row[2]}
    pairs = [(a, b) for a, b, _ in switch_links]
    effective = graph.infer_tiers(switches, pairs, hosts_on, overrides)
    plain = graph.infer_tiers(switches, pairs, hosts_on) if overrides else effective
    leaves = {str(sid) for sid, tier in effective.items() if tier == 1}
    layout = graph.detect_rails(ports, leaves)
    loads = graph.switch_loads(effective, switch_links, adapter_links)

    changed = []
    for sid, row in switches.items():
        wanted = (
            plain[sid] if sid in overrides else effective[sid],
            layout.leaf_rail.get(str(sid)),
            layout.leaf_group.get(str(sid)),
            min(used[sid], 32767),
            loads[sid].down_gbps,
            loads[sid].up_gbps,
        )
        if wanted != row[3:]:
            changed.append(
                Switch(
                    id=sid,
                    tier_inferred=wanted[0],
                    rail=wanted[1],
                    leaf_group=wanted[2],
                    ports_used=wanted[3],
                    down_gbps=wanted[4],
                    up_gbps=wanted[5],
                )
            )
    update_rows(
        Switch,
        changed,
        ["tier_inferred", "rail", "leaf_group", "ports_used", "down_gbps", "up_gbps"],
    )
    rails_changed = []
    for aid, adapter in adapters.items():
        rails = (layout.adapter_rail.get(str(aid)), layout.nic_rail.get(str(aid)))
        if adapter[5:7] != rails:
            rails_changed.append(Adapter(id=aid, rail=rails[0], nic_rail=rails[1]))
    update_rows(Adapter, rails_changed, ["rail", "nic_rail"])
    Fabric.objects.filter(pk=fabric.pk).update(
        summary={**_summary(switches, effective, layout, adapters), **more}
    )


def _summary(switches, tiers, layout: graph.RailLayout, adapters) -> dict[str, Any]:
    by_tier = Counter(t for t in tiers.values() if t is not None)
    names = {str(sid): row[1] for sid, row in switches.items()}
    host_adapters = [row for row in adapters.values() if row[1] == binding.HOST]
    return {
        "tiers": {graph.tier_name(t): by_tier[t] for t in sorted(by_tier)},
        "untiered_switches": sum(1 for t in tiers.values() if t is None),
        "rail_optimised": layout.rail_optimised,
        "rails": [
            {
                "rail": rail,
                "nics": layout.rail_labels.get(rail, []),
                "leaves": sorted(names[leaf] for leaf in leaves),
            }
            for rail, leaves in layout.rails.items()
        ],
        "leaf_groups": len(layout.groups),
        "host_adapters": len(host_adapters),
        "unbound_host_adapters": sum(1 for row in host_adapters if row[2] is None),
        "unnamed_host_adapters": sum(1 for row in host_adapters if not row[3]),
    }


def hosts_by_switch(rows: Iterable[tuple[int, int | None, str]]) -> dict[int, set[str]]:
    """(switch id, server id, host name) rows -> switch id -> host keys."""
    found: dict[int, set[str]] = defaultdict(set)
    for switch_id, server_id, host_name in rows:
        key = host_key(server_id, host_name)
        if key:
            found[switch_id].add(key)
    return found


# -- Ethernet fabrics from LLDP -------------------------------------------------------------

ETHERNET_FABRIC = "ethernet"
"""The fabric the Ethernet switches heard over LLDP make up (kind ethernet)."""


@dataclass(frozen=True)
class EthernetSyncResult:
    fabric: str
    switches: int = 0
    nics: int = 0
    links: int = 0
    added: int = 0
    gone: int = 0
    nics_filled: int = 0
    skipped: str = ""


def _lldp_facts() -> tuple[list[lldp.NicFact], dict[int, tuple[int, str, str, str]]]:
    """Every NIC some agent heard an LLDP neighbour on (one query), and for each its server,
    name and the switch and port it carries now."""
    facts, current = [], {}
    rows = (
        Nic.objects.exclude(lldp_neighbors=[])
        .values_list(
            "id",
            "server_id",
            "server__hostname",
            "name",
            "mac",
            "speed_mbps",
            "state",
            "lldp_neighbors",
            "switch",
            "switch_port",
        )
        .order_by("server_id", "name")
        .iterator(chunk_size=5000)
    )
    for nic_id, server_id, hostname, name, mac, speed, state, neighbors, switch, port in rows:
        listed = [n for n in neighbors or [] if isinstance(n, dict)]
        if not listed:
            continue
        facts.append(
            lldp.NicFact(nic_id, server_id, hostname, name, mac, speed, state or "", listed)
        )
        current[nic_id] = (server_id, name, switch, port)
    return facts, current


def ethernet_fabric_sync(*, force: bool = False) -> EthernetSyncResult:
    """The Ethernet fabric (`ETHERNET_FABRIC`) from the LLDP neighbours agents report: the
    switches they hear, each server NIC's cable to its switch port, at the NIC's speed; and
    each NIC's switch and port filled where no person entered them (`lldp.fill_switch_port`).

    Returns at once when no report was applied since the last pass (the inventory revision),
    unless `force`. Written like a snapshot (bulk, a fixed number of queries whatever the
    fleet's size), recorded as one (format `lldp`) when a switch, NIC or cable came or went.
    A fabric of that name pushed from ibnetdiscover is left alone.
    """
    revision = revision_get(name="inventory")
    fabric = Fabric.objects.filter(name=ETHERNET_FABRIC).first()
    if fabric is not None and fabric.kind != FabricKind.ETHERNET:
        return EthernetSyncResult(ETHERNET_FABRIC, skipped="an InfiniBand fabric")
    if fabric is not None and not force and fabric.summary.get("inventory_revision") == revision:
        return EthernetSyncResult(ETHERNET_FABRIC, skipped="unchanged")
    facts, current = _lldp_facts()
    heard = lldp.lldp_fabric(facts)
    if fabric is None and not heard.links:
        return EthernetSyncResult(ETHERNET_FABRIC, skipped="no LLDP neighbours")
    now = timezone.now()
    with transaction.atomic():
        fabric, _ = Fabric.objects.select_for_update().get_or_create(
            name=ETHERNET_FABRIC, defaults={"kind": FabricKind.ETHERNET}
        )
        before: dict[tuple[int, str], set[tuple[str, str]]] = defaultdict(set)
        for server_id, nic, switch, port in FabricLink.objects.filter(
            fabric=fabric, gone_at__isnull=True, b_adapter__isnull=False
        ).values_list("b_adapter__server_id", "b_adapter__nic", "a_switch__name", "a_port_name"):
            before[(server_id, nic)].add((switch[:128], port))
        switch_ids, added, gone = _upsert(
            Switch,
            fabric,
            {
                s.guid: {
                    "description": s.description,
                    "name": s.name,
                    "lid": None,
                    "system_guid": "",
                    "port_count": None,
                }
                for s in heard.switches.values()
            },
            now,
        )
        adapter_ids, a, g = _upsert(
            Adapter,
            fabric,
            {
                n.guid: {
                    "kind": NodeKind.CA,
                    "role": binding.HOST,
                    "node_guid_known": False,
                    "description": n.description,
                    "host_name": n.host_name,
                    "nic": n.nic,
                    "system_guid": "",
                    "port_count": None,
                    "port_guids": [],
                    "server_id": n.server_id,
                    "binding_method": binding.BY_LLDP,
                }
                for n in heard.adapters.values()
            },
            now,
        )
        added, gone = added + a, gone + g
        _, a, g = _upsert(
            FabricLink,
            fabric,
            {
                link.key: {
                    "a_switch_id": switch_ids[link.switch],
                    "a_adapter_id": None,
                    "a_port": link.port,
                    "a_port_name": link.port_name,
                    "a_lid": None,
                    "b_switch_id": None,
                    "b_adapter_id": adapter_ids[link.adapter],
                    "b_port": None,
                    "b_lid": None,
                    "width": "",
                    "lane_speed": link.lane_speed,
                    "gbps": link.gbps,
                    "state": LinkState.UP if link.up else LinkState.DOWN,
                }
                for link in heard.links
            },
            now,
            want_ids=False,
            key="key",
        )
        added, gone = added + a, gone + g
        filled = []
        for nic_id, (server_id, name, switch, port) in current.items():
            previous = before.get((server_id, name), set())
            wanted = lldp.fill_switch_port(
                (switch, port),
                (switch, port) if (switch, port) in previous else None,
                heard.nic_ports.get(nic_id),
            )
            if wanted != (switch, port):
                filled.append(Nic(id=nic_id, switch=wanted[0], switch_port=wanted[1]))
        filled += _unheard_nics(fabric, before, {(s, n) for s, n, _, _ in current.values()})
        update_rows(Nic, filled, ["switch", "switch_port"])
        _derive(fabric, inventory_revision=revision)
        if added or gone or filled:
            up = sum(1 for link in heard.links if link.up)
            snapshot = FabricSnapshot.objects.create(
                fabric=fabric,
                format="lldp",
                status=SnapshotStatus.APPLIED,
                received_at=now,
                switch_count=len(heard.switches),
                adapter_count=len(heard.adapters),
                link_count=up,
                ports_down=len(heard.links) - up,
                added=added,
                gone=gone,
            )
            Fabric.objects.filter(pk=fabric.pk).update(last_snapshot=snapshot, applied_at=now)
            revision_bump(name="fabric")
            _findings_after_commit(fabric)
    return EthernetSyncResult(
        fabric=fabric.name,
        switches=len(heard.switches),
        nics=len(heard.adapters),
        links=len(heard.links),
        added=added,
        gone=gone,
        nics_filled=len(filled),
    )


def _unheard_nics(
    fabric: Fabric, before: dict[tuple[int, str], set[tuple[str, str]]], heard: set
) -> list[Nic]:
    """NICs whose switch and port LLDP filled before and no longer hears: emptied (one
    query; a person's entry is kept)."""
    lost = {key: ports for key, ports in before.items() if key not in heard}
    if not lost:
        return []
    emptied = []
    for nic_id, server_id, name, switch, port in Nic.objects.filter(
        server_id__in={server_id for server_id, _ in lost}
    ).values_list("id", "server_id", "name", "switch", "switch_port"):
        if (switch, port) in lost.get((server_id, name), set()):
            emptied.append(Nic(id=nic_id, switch="", switch_port=""))
    return emptied
