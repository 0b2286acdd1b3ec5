"""The server page's read: one server with the problem first, and one answer for each fact
the page shows twice.

- The header's health: the worst open finding's severity (the servers list's `health`), how
  many findings are open, the GPUs needing action (open health findings about one of its
  GPUs, as `/health/` counts them) and the lost GPUs (the servers list's `lost_gpu_count`).
- The GPUs: live ones by index, then the lost ones (a lost GPU keeps the index it had, which
  NVML may since have given to another card), each marked lost with when it was last seen.
- The NICs: the switch and port each is cabled to, from the NIC's own record (LLDP, or set by
  people), else from the fabric's cable to it, the same rows the page's fabric table shows
  (`fabric.selectors.server_fabric`, read once for both).
- The commands for its scheduler nodes (`topology.commands`), the reason from the worst open
  finding.

- Who holds each GPU now (`gpu.held_by`: its open allocations, MIG devices' too) and the
  workloads that ended on it lately.

A fixed number of queries whatever the fleet's size: the server's own prefetches, its open
findings, its nodes, its fabric rows (one, and three per fabric it is on), and two for its
workloads (the holders, the recent ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clusters import selectors as cluster_selectors
from fabric.selectors import server_fabric
from findings import selectors as finding_selectors
from findings.choices import SEVERITY_ORDER, Family, FindingType
from inventory import selectors as inventory_selectors
from inventory.choices import GpuStatus
from inventory.models import Gpu, Nic, Server
from workloads import selectors as workload_selectors

from .commands import NodeCommands, scheduler_commands


@dataclass(frozen=True)
class ServerHealth:
    severity: str
    """The worst open finding's severity, or `ok`."""
    open_findings: int
    gpus_needing_action: int
    lost_gpus: int


@dataclass(frozen=True)
class NicPort:
    """Where a NIC is cabled: `source` says who knows (`nic`: its own record, LLDP or people;
    `fabric`: the fabric's cable); `switch_id` links a fabric switch's page."""

    switch: str
    port: str
    source: str
    switch_id: int | None = None


def gpus_in_page_order(gpus: list[Gpu]) -> list[Gpu]:
    """Live GPUs by index, then lost ones by index: a lost GPU's index may be a live one's."""
    return sorted(gpus, key=lambda g: (g.status == GpuStatus.LOST, g.index, g.pci_bus_id))


def with_holders(gpus: list[Gpu], held: dict[int, list[Any]]) -> list[Gpu]:
    """Each GPU with `held_by`: the open allocations on it (none: an empty list)."""
    for gpu in gpus:
        gpu.held_by = held.get(gpu.pk, [])  # type: ignore[attr-defined]
    return gpus


def health_of(server: Server, findings: list[Any]) -> ServerHealth:
    """The header's badge from rows already read (no query)."""
    health_types = set(FindingType.of_family(Family.HEALTH))
    needing = {f.gpu_id for f in findings if f.gpu_id and f.type in health_types}
    return ServerHealth(
        severity=getattr(server, "health", None) or (findings[0].severity if findings else "ok"),
        open_findings=len(findings),
        gpus_needing_action=len(needing),
        lost_gpus=getattr(server, "lost_gpu_count", 0) or 0,
    )


def nic_ports(nics: list[Nic], fabrics: list[Any]) -> dict[int, NicPort]:
    """Each NIC's switch and port (NIC id -> where), its own record first, then the fabric's
    cable to the adapter of its name or GUID. NICs known to neither are absent."""
    cabled: dict[str, dict] = {}
    for entry in fabrics:
        for row in entry.nics:
            cabled.setdefault(str(row["nic"]), row)
    out = {}
    for nic in nics:
        if nic.switch or nic.switch_port:
            out[nic.pk] = NicPort(nic.switch, nic.switch_port, "nic")
            continue
        row = cabled.get(nic.name) or (cabled.get(nic.node_guid) if nic.node_guid else None)
        if row is not None:
            out[nic.pk] = NicPort(row["switch"], str(row["port"]), "fabric", row["switch_id"])
    return out


def server_page(pk: int) -> dict[str, Any] | None:
    """Everything the server page shows (None: no such server)."""
    server = inventory_selectors.server_detail().filter(pk=pk).first()
    if server is None:
        return None
    findings = list(finding_selectors.open_findings(server_id=server.pk))
    nodes = list(cluster_selectors.server_nodes(server.pk))
    fabrics = server_fabric(server.pk)
    nics = list(server.nics.all())
    ports = nic_ports(nics, fabrics)
    gpus = with_holders(list(server.gpus.all()), workload_selectors.held_now(server_id=server.pk))
    return {
        "server": server,
        "gpus": gpus_in_page_order(gpus),
        "recent_workloads": workload_selectors.recent_workloads(server_id=server.pk),
        "health": health_of(server, findings),
        "findings": findings,
        "nodes": nodes,
        "nics": [(nic, ports.get(nic.pk)) for nic in nics],
        "fabrics": fabrics,
        "commands": node_commands_for(nodes, findings),
    }


def worst_first(findings: list[Any]) -> list[Any]:
    """Findings of several reads as one list, the most severe first, ties by id."""
    rank = {s: i for i, s in enumerate(SEVERITY_ORDER)}
    unique = {f.pk: f for f in findings}.values()
    return sorted(unique, key=lambda f: (rank.get(f.severity, len(rank)), f.pk))


def node_commands_for(nodes: list[Any], findings: list[Any]) -> list[NodeCommands]:
    """The commands for these scheduler nodes; `findings` worst first, as `open_findings`
    orders them."""
    return scheduler_commands(
        ((n.kind, n.name, n.cluster.name) for n in nodes if n.gone_at is None),
        message=findings[0].message if findings else None,
    )
