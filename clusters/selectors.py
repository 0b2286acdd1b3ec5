"""Reads of the scheduler layer, each a fixed number of queries."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol, cast

from django.db.models import (
    Case,
    CharField,
    Count,
    Exists,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, NullIf

from core.db.distinct import distinct_values
from findings.choices import SEVERITY_ORDER
from findings.models import Finding
from findings.selectors import open_findings_by_severity
from inventory.choices import GpuStatus
from inventory.models import Gpu, HardwareProfile, Server
from inventory.selectors import hardware_profile_for

from .choices import ClusterSource
from .models import Cluster, ClusterSnapshot, Node


def _agent_gpu_count() -> Coalesce:
    counted = (
        Gpu.objects.filter(server=OuterRef("server_id"))
        .exclude(status=GpuStatus.LOST)
        .order_by()
        .values("server")
        .annotate(n=Count("*"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def _node_findings() -> QuerySet[Finding]:
    """Open findings about a node (of `node_list()`) or about its bound server."""
    about = Q(node=OuterRef("pk")) | Q(server__isnull=False, server=OuterRef("server_id"))
    return Finding.objects.filter(about, resolved_at__isnull=True).order_by()


def node_list(*, include_gone: bool = False) -> QuerySet[Node]:
    """Nodes with their cluster and bound server, the agent's GPU count beside them, the
    driver version (`driver_version`: the bound server's, as its agent reports it, else the
    node's own label), and the open findings about the node or its server (`open_findings`,
    `worst_severity`)."""
    open_findings = (
        _node_findings().annotate(one=Value(1)).values("one").annotate(n=Count("*")).values("n")
    )
    worst = Case(
        *(When(Exists(_node_findings().filter(severity=s)), then=Value(s)) for s in SEVERITY_ORDER),
        default=Value(""),
        output_field=CharField(),
    )
    # Subqueries, not joins: the page's COUNT(*) stays a plain count without a GROUP BY.
    nodes = Node.objects.select_related("cluster", "server").annotate(
        agent_gpu_count=_agent_gpu_count(),
        open_findings=Coalesce(Subquery(open_findings, output_field=IntegerField()), 0),
        worst_severity=worst,
        driver_version=Coalesce(
            NullIf("server__driver_version", Value("")),
            NullIf(KT("versions__driver_version"), Value("")),
            Value(""),
            output_field=CharField(),
        ),
    )
    return nodes if include_gone else nodes.filter(gone_at__isnull=True)


def cluster_list() -> QuerySet[Cluster]:
    active = Q(nodes__gone_at__isnull=True)
    return Cluster.objects.annotate(
        node_count=Count("nodes", filter=active),
        bound_node_count=Count("nodes", filter=active & Q(nodes__server__isnull=False)),
        gpu_capacity=Coalesce(Sum("nodes__gpu_capacity", filter=active), 0),
        gpu_allocatable=Coalesce(Sum("nodes__gpu_allocatable", filter=active), 0),
    )


def snapshot_list() -> QuerySet[ClusterSnapshot]:
    """Snapshots without their raw body (megabytes while one waits)."""
    return ClusterSnapshot.objects.defer("raw")


def scheduler_summary() -> dict:
    """Node counts per cluster and kind for the overview, in four queries: the clusters with
    their counts, the live and the unbound nodes, open findings by severity."""
    clusters = list(cluster_list().order_by("name"))
    active = Node.objects.filter(gone_at__isnull=True)
    return {
        "clusters": clusters,
        "total": active.count(),
        "unbound": active.filter(server__isnull=True).count(),
        "by_severity": open_findings_by_severity(),
    }


def node_disagrees(
    *,
    open_findings: int,
    bound: bool,
    pci_gpu_count: int | None,
    agent_gpu_count: int,
    expected_gpus: int | None,
) -> bool:
    """Whether a node's row is flagged on the nodes page: it has open findings, no server, or
    its server sees fewer GPUs through NVML than on the PCI bus or than its profile expects."""
    return bool(
        open_findings
        or not bound
        or (pci_gpu_count is not None and pci_gpu_count > agent_gpu_count)
        or (expected_gpus is not None and agent_gpu_count < expected_gpus)
    )


class NodeRow(Protocol):
    """A node of `node_list()` (its annotations), with what `nodes_with_expected` adds."""

    server: Server | None
    open_findings: int
    agent_gpu_count: int
    expected_gpus: int | None
    disagrees: bool


def nodes_with_expected(nodes: list[Node]) -> list[Node]:
    """Nodes of `node_list()` with their server's expected GPU count (`expected_gpus`, from its
    hardware profile) and `disagrees`; one query for the profiles, whatever the count."""
    profiles = list(HardwareProfile.objects.all())
    for node in cast("list[NodeRow]", nodes):
        server = node.server
        profile = (
            hardware_profile_for(
                vendor=server.vendor,
                product=server.product,
                profile_id=server.hardware_profile_id,
                profiles=profiles,
            )
            if server is not None
            else None
        )
        node.expected_gpus = profile.expected_gpu_count if profile else None
        node.disagrees = node_disagrees(
            open_findings=node.open_findings,
            bound=server is not None,
            pci_gpu_count=server.pci_gpu_count if server is not None else None,
            agent_gpu_count=node.agent_gpu_count,
            expected_gpus=node.expected_gpus,
        )
    return nodes


def node_states() -> list[str]:
    """The node states and state flags present (`idle`, `mixed`, `drain`, ...), for the
    state filter's dropdown: two small queries."""
    live = Node.objects.filter(gone_at__isnull=True)
    # Walks of the live nodes' state indexes (core/db/distinct.py), not two passes over them.
    states = set(distinct_values(live.exclude(state=""), "state"))
    for flags in distinct_values(live.exclude(state_flags=[]), "state_flags"):
        states.update(str(f).lower() for f in flags or ())
    return sorted(states)


def node_state_q(value: str) -> Q:
    """Nodes in that state, or carrying that flag: `drain` finds an `IDLE+DRAIN` node."""
    value = value.strip().lower()
    # JSON list membership without JSON operators, portable to SQLite and PostgreSQL.
    return Q(state__iexact=value) | Q(state_flags__icontains=f'"{value}"')


def node_search_q(value: str) -> Q:
    """Nodes whose name, hostname or an address contains `value`, or whose bound server's
    hostname does: one definition for the nodes list, the API and the global search."""
    value = value.strip()
    return (
        Q(name__icontains=value)
        | Q(hostname__icontains=value)
        | Q(addresses__icontains=value)
        | Q(server__hostname__icontains=value)
    )


def node_search(value: str, *, limit: int) -> tuple[list[Node], int]:
    """The first `limit` present nodes matching `node_search_q`, by cluster and name, and how
    many match."""
    found = (
        Node.objects.select_related("cluster", "server")
        .filter(node_search_q(value), gone_at__isnull=True)
        .order_by("cluster__name", "name", "pk")
    )
    return list(found[:limit]), found.count()


def node_detail() -> QuerySet[Node]:
    """One node's page: present or gone, with its cluster, server and finding count."""
    return node_list(include_gone=True)


# The node labels an operator reads first: what GPU, how many, how MIG and sharing are set.
NODE_LABELS_THAT_MATTER = (
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.memory",
    "nvidia.com/gpu.replicas",
    "nvidia.com/gpu.sharing-strategy",
    "nvidia.com/mig.strategy",
    "nvidia.com/mig.config",
    "nvidia.com/mig.config.state",
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.runtime.major",
    "topology.kubernetes.io/zone",
    "node.kubernetes.io/instance-type",
)


def node_labels_that_matter(labels: dict) -> list[tuple[str, str]]:
    """The GPU, MIG and placement labels of a node, in a fixed order (absent ones left out)."""
    return [(key, str(labels[key])) for key in NODE_LABELS_THAT_MATTER if key in labels]


def server_picker() -> list[tuple[int, str]]:
    """Every server as (id, hostname), for the node page's binding picker: one query."""
    return list(Server.objects.order_by("hostname").values_list("id", "hostname"))


def cluster_names() -> list[str]:
    return list(Cluster.objects.order_by("name").values_list("name", flat=True))


def cluster_kind(name: str) -> str | None:
    """The kind of the cluster of that name, None when there is none (one query)."""
    return Cluster.objects.filter(name=name).values_list("kind", flat=True).first()


def server_nodes(server_id: int) -> QuerySet[Node]:
    """The scheduler nodes a server runs, present ones only."""
    return (
        Node.objects.filter(server_id=server_id, gone_at__isnull=True)
        .select_related("cluster")
        .order_by("cluster__name", "name")
    )


def clusters_due_for_sync(*, now: datetime) -> list[int]:
    """Ids of the pulled clusters whose sync interval has passed (or that never synced)."""
    pulled = Cluster.objects.exclude(source=ClusterSource.PUSH).only(
        "id", "last_sync_at", "sync_interval_s"
    )
    return [
        c.pk
        for c in pulled
        if c.last_sync_at is None or c.last_sync_at + timedelta(seconds=c.sync_interval_s) <= now
    ]
