"""Reads of the fabric layer: lists with their relations joined (a fixed number of queries
whatever the fabric's size), the plain facts the pure functions (graph, exports, rules) take,
and what the pages show of one switch, one server and each fabric."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery, Sum
from django.urls import reverse

from inventory.models import Gpu, Link, Server

from .. import binding, graph, rules
from ..choices import FabricKind, LinkState
from ..exports import SchedulerTree, TreeFacts, host_labels, scheduler_tree
from ..graph import host_key
from ..models import Adapter, Fabric, FabricLink, FabricSnapshot, Switch


def fabric_list() -> QuerySet[Fabric]:
    return Fabric.objects.select_related("last_snapshot").defer(
        "node_name_map", "last_snapshot__raw"
    )


def snapshot_list() -> QuerySet[FabricSnapshot]:
    return FabricSnapshot.objects.select_related("fabric").defer("raw")


def switch_list(*, include_gone: bool = False) -> QuerySet[Switch]:
    rows = Switch.objects.select_related("fabric").defer("fabric__node_name_map")
    return rows if include_gone else rows.filter(gone_at__isnull=True)


def adapter_list(*, include_gone: bool = False) -> QuerySet[Adapter]:
    rows = Adapter.objects.select_related("fabric", "server").defer("fabric__node_name_map")
    return rows if include_gone else rows.filter(gone_at__isnull=True)


def link_list(*, include_gone: bool = False) -> QuerySet[FabricLink]:
    rows = FabricLink.objects.select_related(
        "fabric", "a_switch", "a_adapter__server", "b_switch", "b_adapter__server"
    ).defer("fabric__node_name_map")
    return rows if include_gone else rows.filter(gone_at__isnull=True)


# -- facts for the pure functions --------------------------------------------------------


@dataclass(slots=True)
class HostFacts:
    """Who a host key is: its bound server (id and hostname) or only a host name."""

    server_id: int | None
    name: str


def _host_ports(
    fabric: Fabric,
) -> tuple[list[graph.HostPort], dict[str, HostFacts], dict[str, str]]:
    """Every live host adapter's cable to a switch, who each host is, and the GUID of each
    adapter known by GUID alone (adapter id -> GUID; its port's `host` is None). One query."""
    rows = FabricLink.objects.filter(
        fabric=fabric,
        gone_at__isnull=True,
        state=LinkState.UP,
        a_switch__isnull=False,
        b_adapter__role=binding.HOST,
        b_adapter__gone_at__isnull=True,
    ).values_list(
        "a_switch_id",
        "b_adapter_id",
        "b_adapter__server_id",
        "b_adapter__server__hostname",
        "b_adapter__host_name",
        "b_adapter__nic",
        "gbps",
        "b_adapter__guid",
    )
    ports, hosts, unnamed = [], {}, {}
    for switch_id, adapter_id, server_id, hostname, host_name, nic, gbps, guid in rows:
        key = host_key(server_id, host_name)
        if key is not None:
            hosts[key] = HostFacts(server_id, hostname or host_name)
        else:
            unnamed[str(adapter_id)] = guid
        ports.append(graph.HostPort(str(adapter_id), key, nic, str(switch_id), gbps))
    return ports, hosts, unnamed


def fabric_tree(fabric: Fabric) -> tuple[TreeFacts, dict[str, HostFacts]]:
    """The switch tree of a fabric as plain facts (three queries), and its hosts; a switch
    without a name is named by its GUID. A host adapter known by GUID alone stands in
    `leaf_hosts` as a host of its own (key `g<guid>`, in `facts.unnamed`)."""
    switches, pairs = switch_tree_facts(fabric.pk)
    ports, hosts, unnamed = _host_ports(fabric)
    leaf_hosts: dict[str, set[str]] = defaultdict(set)
    by_guid: dict[str, str] = {}
    for port in ports:
        if port.host is not None:
            leaf_hosts[port.switch].add(port.host)
        elif port.adapter in unnamed:
            key = f"g{unnamed[port.adapter]}"
            by_guid[key] = unnamed[port.adapter]
            leaf_hosts[port.switch].add(key)
    facts = TreeFacts(
        switches={k: (name, tier) for k, (name, tier, _) in switches.items()},
        switch_links=pairs,
        leaf_hosts=dict(leaf_hosts),
        leaf_group={k: group for k, (_, tier, group) in switches.items() if tier == 1 and group},
        unnamed=by_guid,
    )
    return facts, hosts


def fabric_scheduler_tree(
    fabric: Fabric,
    node_names: dict[int, str] | None = None,
    by_guid: Collection[str] = (),
    *,
    named_only: bool = False,
    skip_servers: Collection[int] = (),
) -> tuple[SchedulerTree, dict[str, list[str]]]:
    """The tree a scheduler should get: servers named by `node_names` (server id -> the
    scheduler's node name) where given, else by their host name; the adapters known by GUID
    alone whose GUIDs are in `by_guid` (16 hex digits) as `0x<guid>` (to compare a site's
    file that names them so), the others left out and said in `tree.unlisted`.

    `named_only`: the hosts `node_names` does not name are left out (a Slurm cluster's file
    lists its own nodes, never another scheduler's hosts); `skip_servers`: these servers are
    left out (the hosts only another scheduler knows). `tree.left_out` counts them."""
    facts, hosts = fabric_tree(fabric)
    node_names = node_names or {}
    skip = set(skip_servers)
    names = {
        key: node_names.get(host.server_id, host.name) if host.server_id else host.name
        for key, host in hosts.items()
        if host.name or host.server_id in node_names
    }
    kept = {
        key: name
        for key, name in names.items()
        if hosts[key].server_id not in skip
        and (not named_only or hosts[key].server_id in node_names)
    }
    wanted = set(by_guid)
    kept.update({key: f"0x{guid}" for key, guid in facts.unnamed.items() if guid in wanted})
    tree, notes = scheduler_tree(facts, kept)
    tree.left_out = len(names) - len(set(names) & set(kept))
    return tree, notes


def fabric_adapter_guids(
    fabric: Fabric, node_names: dict[int, str] | None = None
) -> dict[str, tuple[str, str]]:
    """Every node and port GUID of the fabric's live host adapters -> (the adapter's GUID,
    the name the scheduler tree lists its host by: `node_names`' for its bound server, else
    the host name; "" for one known by GUID alone). What a GUID a person wrote stands for,
    as `rules.scheduler_guid_names` takes it. One query."""
    node_names = node_names or {}
    found: dict[str, tuple[str, str]] = {}
    for guid, port_guids, server_id, hostname, host_name in Adapter.objects.filter(
        fabric=fabric, gone_at__isnull=True, role=binding.HOST
    ).values_list("guid", "port_guids", "server_id", "server__hostname", "host_name"):
        name = node_names.get(server_id, hostname or host_name) if server_id else host_name
        for each in [guid, *(g for g in port_guids or [] if isinstance(g, str))]:
            found.setdefault(each.lower(), (guid, name or ""))
    return found


def switch_tree_facts(
    fabric_id: int,
) -> tuple[dict[str, tuple[str, int | None, int | None]], list[tuple[str, str]]]:
    """A fabric's live switches (key -> name, tier, leaf group) and the cables up between
    them, as `exports.host_labels` takes them (two queries)."""
    switches = {
        str(sid): (name or guid, override or inferred, group)
        for sid, name, guid, override, inferred, group in Switch.objects.filter(
            fabric_id=fabric_id, gone_at__isnull=True
        ).values_list("id", "name", "guid", "tier_override", "tier_inferred", "leaf_group")
    }
    return switches, _switch_pairs_up(fabric_id)


def _switch_pairs_up(fabric_id: int) -> list[tuple[str, str]]:
    """The live switch-to-switch cables up on a fabric, as (switch key, switch key) (one query)."""
    return [
        (str(a), str(b))
        for a, b in FabricLink.objects.filter(
            fabric_id=fabric_id,
            gone_at__isnull=True,
            state=LinkState.UP,
            a_switch__isnull=False,
            b_switch__isnull=False,
        ).values_list("a_switch_id", "b_switch_id")
    ]


def fabric_server_labels(fabric: Fabric, server_id: int | None = None) -> dict[int, dict[str, str]]:
    """Server id -> the Kubernetes node labels suggested for the switch tiers above it, for
    every bound server on the fabric, or for `server_id` alone (its cables only: a node page
    reads a server's, not the fabric's). Three queries, whatever the fabric's size."""
    switches, pairs = switch_tree_facts(fabric.pk)
    cables = FabricLink.objects.filter(
        fabric=fabric,
        gone_at__isnull=True,
        state=LinkState.UP,
        a_switch__isnull=False,
        b_adapter__server__isnull=False,
        b_adapter__gone_at__isnull=True,
    )
    if server_id is not None:
        cables = cables.filter(b_adapter__server_id=server_id)
    cabled: dict[str, set[str]] = defaultdict(set)
    for switch_id, host in cables.values_list("a_switch_id", "b_adapter__server_id").distinct():
        cabled[str(host)].add(str(switch_id))
    return {int(host): labels for host, labels in host_labels(switches, pairs, cabled).items()}


def fabric_nvlink_blocks(
    fabric: Fabric, node_names: dict[int, str] | None = None
) -> list[tuple[str, list[str]]]:
    """The NVLink domains among the fabric's bound servers (`graph.nvlink_domains`), each as
    (`<cluster uuid>/<clique id>`, its servers' names: `node_names` (server id -> the
    scheduler's name) where given, else host names). One query."""
    node_names = node_names or {}
    on_fabric = Adapter.objects.filter(
        fabric=fabric, gone_at__isnull=True, server__isnull=False
    ).values("server_id")
    names: dict[str, str] = {}
    gpus = []
    for server_id, hostname, cluster_uuid, clique_id in (
        Gpu.objects.filter(server_id__in=on_fabric)
        .exclude(fabric_cluster_uuid="")
        .values_list("server_id", "server__hostname", "fabric_cluster_uuid", "fabric_clique_id")
    ):
        key = str(server_id)
        names[key] = node_names.get(server_id, hostname)
        gpus.append((key, cluster_uuid, clique_id))
    return [
        (f"{cluster_uuid}/{clique_id}", sorted(names[host] for host in hosts))
        for (cluster_uuid, clique_id), hosts in graph.nvlink_domains(gpus).items()
    ]


@dataclass(frozen=True, slots=True)
class ServerBandwidth:
    host: str
    server_id: int | None
    hostname: str
    nics: int
    gbps: float
    gpus: int | None
    gbps_per_gpu: float | None
    nics_per_gpu: float | None
    leaves: list[str]
    pix_nics_per_gpu: float | None = None
    """NICs that share a PCIe switch with a GPU (`PIX` in nvidia-smi topo), per GPU: 1.0 on
    a server where every GPU has its own NIC for GPUDirect RDMA."""


def fabric_host_bandwidth(fabric: Fabric) -> list[ServerBandwidth]:
    """Per host on the fabric: NICs, Gb/s, GPUs (from the inventory), per GPU, and NICs at
    PIX per GPU (three queries)."""
    ports, hosts, _unnamed = _host_ports(fabric)
    server_ids = {h.server_id for h in hosts.values() if h.server_id is not None}
    pix = (
        Link.objects.filter(server_id=OuterRef("pk"), link_class="PIX", nic__isnull=False)
        .order_by()
        .values("server_id")
        .annotate(n=Count("nic_id", distinct=True))
        .values("n")
    )
    gpus: dict[int, int] = {}
    pix_nics: dict[int, int] = {}
    for server_id, n, pix_n in (
        Server.objects.filter(id__in=server_ids)
        .annotate(n=Count("gpus"), pix=Subquery(pix))
        .values_list("id", "n", "pix")
    ):
        gpus[server_id], pix_nics[server_id] = n, pix_n or 0
    switch_names = dict(Switch.objects.filter(fabric=fabric).values_list("id", "name"))
    leaves: dict[str, set[str]] = defaultdict(set)
    for port in ports:
        if port.host:
            leaves[port.host].add(switch_names.get(int(port.switch), port.switch))
    per_host = {
        key: gpus.get(host.server_id) for key, host in hosts.items() if host.server_id is not None
    }
    return [
        ServerBandwidth(
            host=row.host,
            server_id=hosts[row.host].server_id,
            hostname=hosts[row.host].name,
            nics=row.nics,
            gbps=row.gbps,
            gpus=row.gpus,
            gbps_per_gpu=row.gbps_per_gpu,
            nics_per_gpu=row.nics_per_gpu,
            leaves=sorted(leaves[row.host]),
            pix_nics_per_gpu=_per_gpu(pix_nics.get(hosts[row.host].server_id or 0), row.gpus),
        )
        for row in graph.host_bandwidth(ports, {k: v for k, v in per_host.items() if v})
    ]


def _per_gpu(count: int | None, gpus: int | None) -> float | None:
    return round(count / gpus, 3) if gpus and count is not None else None


LINK_FACT_FIELDS = (
    "key",
    "a_switch__name",
    "a_switch__guid",
    "a_adapter__description",
    "a_adapter__guid",
    "a_port",
    "b_switch_id",
    "b_switch__name",
    "b_switch__guid",
    "b_adapter__description",
    "b_adapter__guid",
    "b_port",
    "width",
    "lane_speed",
    "gbps",
    "a_switch_id",
    "b_adapter__server_id",
)


def _link_facts(rows: QuerySet[FabricLink]) -> list[rules.LinkFact]:
    """Cables as the rules see them, read as plain values (no model instances: a fabric has
    hundreds of thousands of cables). An end is named as its model's str() names it."""
    facts = []
    for row in rows.values_list(*LINK_FACT_FIELDS).iterator(chunk_size=5000):
        key, a_sw, a_sw_guid, a_ad, a_ad_guid, a_port, b_switch_id, b_sw, b_sw_guid = row[:9]
        b_ad, b_ad_guid, b_port, width, speed, gbps, a_switch_id, server_id = row[9:]
        a = (a_sw or a_sw_guid) if a_switch_id is not None else (a_ad or a_ad_guid)
        b = (b_sw or b_sw_guid) if b_switch_id is not None else (b_ad or b_ad_guid or "")
        facts.append(
            rules.LinkFact(
                key=key,
                a_name=a or "",
                a_port=a_port,
                b_name=b,
                b_port=b_port,
                width=width,
                speed=speed,
                gbps=gbps,
                between_switches=b_switch_id is not None and a_switch_id is not None,
                server_id=server_id,
            )
        )
    return facts


def _peer_group(product: str, gpu_model: str, gpus: int) -> str:
    return f"{gpus} x {gpu_model or 'GPU'}" + (f" in {product}" if product else "")


def fabric_findings(fabric: Fabric) -> list[rules.FabricFinding]:
    """Every fabric rule run on the fabric as it is now (nothing stored)."""
    found: list[rules.FabricFinding] = []
    up = FabricLink.objects.filter(fabric=fabric, gone_at__isnull=True, state=LinkState.UP)
    found += rules.degraded_links(fabric.name, _link_facts(up))
    ethernet = fabric.kind == FabricKind.ETHERNET
    if fabric.applied_at is not None and not ethernet:
        gone = FabricLink.objects.filter(
            fabric=fabric, state=LinkState.UP, gone_at=fabric.applied_at
        )
        found += rules.ports_gone(fabric.name, _link_facts(gone))

    if fabric.summary.get("rail_optimised"):
        leaves = {
            sid: (name, rail)
            for sid, name, rail in Switch.objects.filter(
                fabric=fabric, gone_at__isnull=True, leaf_group__isnull=False
            ).values_list("id", "name", "rail")
        }
        nics = []
        for _adapter, guid, host, nic, rail, server_id, switch_id in FabricLink.objects.filter(
            fabric=fabric,
            gone_at__isnull=True,
            state=LinkState.UP,
            b_adapter__nic_rail__isnull=False,
            a_switch__isnull=False,
        ).values_list(
            "b_adapter_id",
            "b_adapter__guid",
            "b_adapter__host_name",
            "b_adapter__nic",
            "b_adapter__nic_rail",
            "b_adapter__server_id",
            "a_switch_id",
        ):
            # The query keeps only adapters with a NIC rail; the test says so to mypy.
            if switch_id in leaves and rail is not None:
                name, leaf_rail = leaves[switch_id]
                nics.append(rules.RailFact(guid, host, nic, rail, name, leaf_rail, server_id))
        found += rules.wrong_rail(fabric.name, nics)
    if ethernet:
        # LLDP hears management NICs beside the GPU network: a server without lldpd, or a
        # 1 GbE port, says nothing of its GPU network's balance.
        return found

    servers = list(
        Server.objects.annotate(
            gpu_n=Count("gpus", distinct=True),  # beside the adapters join: distinct
            on_fabric=Count(
                "fabric_adapters",
                filter=Q(fabric_adapters__fabric=fabric, fabric_adapters__gone_at__isnull=True),
                distinct=True,
            ),
        )
        .filter(gpu_n__gt=0)
        .values_list("id", "hostname", "product", "gpu_n", "on_fabric")
    )
    models = dict(
        Server.objects.filter(id__in=[s[0] for s in servers])
        .values_list("id", "gpus__name")
        .distinct()
    )
    per_gpu = {row.server_id: row.gbps_per_gpu for row in fabric_host_bandwidth(fabric)}
    facts = [
        rules.ServerFact(
            server_id=sid,
            hostname=hostname,
            peers=_peer_group(product, models.get(sid, ""), gpu_n),
            on_fabric=on_fabric > 0,
            gbps_per_gpu=per_gpu.get(sid),
        )
        for sid, hostname, product, gpu_n, on_fabric in servers
    ]
    found += rules.servers_absent(fabric.name, facts)
    found += rules.servers_unbalanced(fabric.name, facts)
    return found


# -- a switch ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PortRow:
    port: int
    port_name: str
    peer: str
    peer_port: int | None
    peer_url: str
    speed: str
    gbps: float | None
    state: str
    rail: int | None


def switch_ports(switch: Switch) -> list[PortRow]:
    """Every live port of a switch, both ends' sides of the cable (one query)."""
    rows = (
        FabricLink.objects.filter(Q(a_switch=switch) | Q(b_switch=switch), gone_at__isnull=True)
        .select_related("a_switch", "b_switch", "b_adapter__server")
        .order_by("a_port")
    )
    ports = []
    for link in rows:
        if link.a_switch_id == switch.pk:
            port, peer_port = link.a_port, link.b_port
            port_name = link.a_port_name
            if link.b_switch is not None:
                peer = str(link.b_switch)
                url = reverse("fabric-switch-detail", args=[link.b_switch_id])
            elif link.b_adapter is not None:
                server = link.b_adapter.server
                nic = f" {link.b_adapter.nic}" if link.b_adapter.nic else ""
                peer = (server.hostname if server else str(link.b_adapter)) + nic
                url = reverse("server-detail", args=[server.pk]) if server else ""
            else:
                peer, url = "", ""
            rail = link.b_adapter.rail if link.b_adapter else None
        else:
            port, peer_port = link.b_port or 0, link.a_port
            port_name = ""
            peer = str(link.a_switch)
            url = reverse("fabric-switch-detail", args=[link.a_switch_id])
            rail = None
        ports.append(
            PortRow(port, port_name, peer, peer_port, url, link.speed, link.gbps, link.state, rail)
        )
    return sorted(ports, key=lambda p: (p.port, p.port_name))


# -- a server ---------------------------------------------------------------------------


@dataclass
class ServerFabric:
    fabric: str
    nics: list[dict] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)


def server_fabric(server_id: int) -> list[ServerFabric]:
    """Each NIC of a server on each fabric: switch, port, rail, speed; and the node labels a
    Kubernetes scheduler could use for the switch tiers, as its node's page gives them
    (`selectors.fabric_server_labels`). One query, three more per fabric."""
    rows = (
        FabricLink.objects.filter(
            b_adapter__server_id=server_id,
            b_adapter__gone_at__isnull=True,
            gone_at__isnull=True,
            a_switch__isnull=False,
        )
        .select_related("fabric", "a_switch", "b_adapter")
        .only(
            "fabric__name",
            "a_switch__name",
            "a_switch__guid",
            "a_port",
            "a_port_name",
            "b_adapter__nic",
            "b_adapter__guid",
            "b_adapter__rail",
            "width",
            "lane_speed",
            "gbps",
            "state",
        )
        .order_by("fabric__name", "b_adapter__nic", "b_adapter__guid")
    )
    found: dict[int, ServerFabric] = {}
    fabrics: dict[int, Fabric] = {}
    for link in rows:
        adapter = link.b_adapter
        assert adapter is not None  # filtered on the adapter's server
        entry = found.setdefault(link.fabric_id, ServerFabric(link.fabric.name))
        fabrics[link.fabric_id] = link.fabric
        entry.nics.append(
            {
                "nic": adapter.nic or adapter.guid,
                "switch": str(link.a_switch),
                "switch_id": link.a_switch_id,
                "port": link.a_port_name or link.a_port,
                "rail": adapter.rail,
                "speed": link.speed,
                "gbps": link.gbps,
                "state": link.state,
            }
        )
    for fabric_id, entry in found.items():
        entry.labels = fabric_server_labels(fabrics[fabric_id], server_id).get(server_id, {})
    return list(found.values())


# -- the overview's card ---------------------------------------------------------------


@dataclass
class FabricCard:
    name: str
    switches: int
    cables: int
    ports_down: int
    by_model: list[tuple[str, int, float | None]]
    """(server model, servers, Gb/s per GPU) for the bound servers on the fabric."""


def fabric_cards() -> list[FabricCard]:
    """Per fabric: switch, cable and down-port counts of its last snapshot, and network
    bandwidth per GPU by server model, for the bound servers on it. Four queries, whatever
    the number of fabrics."""
    fabrics = list(
        Fabric.objects.select_related("last_snapshot").only(
            "name",
            "last_snapshot__switch_count",
            "last_snapshot__link_count",
            "last_snapshot__ports_down",
        )
    )
    host_cables = FabricLink.objects.filter(
        gone_at__isnull=True,
        state=LinkState.UP,
        b_adapter__server__isnull=False,
        b_adapter__gone_at__isnull=True,
    )
    gbps: dict[tuple[int, str], float] = {
        (row["fabric_id"], row["b_adapter__server__product"]): row["gbps"] or 0.0
        for row in host_cables.order_by()
        .values("fabric_id", "b_adapter__server__product")
        .annotate(gbps=Sum("gbps"))
    }
    members = list(
        host_cables.order_by()
        .values_list("fabric_id", "b_adapter__server_id", "b_adapter__server__product")
        .distinct()
    )
    gpus = dict(
        Server.objects.filter(id__in={server_id for _, server_id, _ in members})
        .annotate(n=Count("gpus"))
        .values_list("id", "n")
    )
    servers: dict[tuple[int, str], int] = defaultdict(int)
    gpu_count: dict[tuple[int, str], int] = defaultdict(int)
    for fabric_id, server_id, product in members:
        servers[(fabric_id, product)] += 1
        gpu_count[(fabric_id, product)] += gpus.get(server_id, 0)
    cards = []
    for fabric in fabrics:
        snapshot = fabric.last_snapshot
        by_model = [
            (
                product or "unknown model",
                servers[(fabric_id, product)],
                total / gpu_count[(fabric_id, product)]
                if gpu_count[(fabric_id, product)]
                else None,
            )
            for (fabric_id, product), total in sorted(gbps.items(), key=lambda i: i[0][1] or "")
            if fabric_id == fabric.pk
        ]
        cards.append(
            FabricCard(
                fabric.name,
                snapshot.switch_count if snapshot else 0,
                snapshot.link_count if snapshot else 0,
                snapshot.ports_down if snapshot else 0,
                by_model,
            )
        )
    return cards
