"""Dashboard pages of the scheduler layer: nodes beside their servers, and findings."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse

from core.tables import Column, table_page
from inventory.models import HardwareProfile
from inventory.selectors import hardware_profile_for

from . import selectors
from .choices import ClusterKind, FindingType, Severity
from .filters import FindingFilter, NodeFilter
from .models import Cluster

NODE_COLUMNS = [
    Column("Node", "name", lambda n: n.name),
    Column("Cluster", "cluster__name", lambda n: n.cluster.name),
    Column("State", "state", lambda n: n.raw_state or n.state),
    Column("Server", "server__hostname", lambda n: n.server.hostname if n.server else ""),
    Column("Bound by", "binding_method", lambda n: n.binding_method),
    Column("Expected", None, lambda n: n.expected_gpus),
    Column(
        "PCI bus",
        "server__pci_gpu_count",
        lambda n: n.server.pci_gpu_count if n.server else None,
        numeric=True,
    ),
    Column(
        "NVML", "agent_gpu_count", lambda n: n.agent_gpu_count if n.server else None, numeric=True
    ),
    Column(
        "Kubernetes alloc.",
        None,
        lambda n: n.gpu_allocatable if n.kind == "kubernetes" else None,
        numeric=True,
    ),
    Column(
        "Slurm GRES", None, lambda n: n.gpu_capacity if n.kind == "slurm" else None, numeric=True
    ),
    Column("In use", "gpu_used", lambda n: n.gpu_used, numeric=True),
    Column("Open findings", "open_findings", lambda n: n.open_findings, numeric=True),
]

FINDING_COLUMNS = [
    Column("Severity", "severity", lambda f: f.severity),
    Column("Type", "type", lambda f: f.get_type_display()),
    Column("Message", None, lambda f: f.message),
    Column("First seen", "first_seen", lambda f: f.first_seen.isoformat()),
    Column("Last seen", "last_seen", lambda f: f.last_seen.isoformat()),
    Column("Resolved", "resolved_at", lambda f: f.resolved_at.isoformat() if f.resolved_at else ""),
]


def _with_expected(nodes) -> list:
    """Each node's server's expected GPU count (hardware profile), and whether counts differ."""
    profiles = list(HardwareProfile.objects.all())
    for node in nodes:
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
        node.disagrees = bool(
            node.open_findings
            or server is None
            or (server.pci_gpu_count is not None and server.pci_gpu_count > node.agent_gpu_count)
            or (node.expected_gpus is not None and node.agent_gpu_count < node.expected_gpus)
        )
    return nodes


def _cluster_names() -> list[str]:
    return list(Cluster.objects.order_by("name").values_list("name", flat=True))


@login_required
def node_list(request: HttpRequest) -> HttpResponse:
    return table_page(
        request,
        queryset=NodeFilter(request.GET, queryset=selectors.node_list()).qs,
        columns=NODE_COLUMNS,
        default_sort="cluster__name",
        template="clusters/node_list.html",
        filename="nodes.csv",
        context=lambda: {"clusters": _cluster_names(), "kinds": ClusterKind.choices},
        prepare=_with_expected,
    )


@login_required
def finding_list(request: HttpRequest) -> HttpResponse:
    params = request.GET.copy()
    params.setdefault("open", "true")
    return table_page(
        request,
        queryset=FindingFilter(params, queryset=selectors.finding_list()).qs,
        columns=FINDING_COLUMNS,
        default_sort="-last_seen",
        template="clusters/finding_list.html",
        filename="findings.csv",
        context=lambda: {
            "open": params["open"],
            "types": FindingType.choices,
            "severities": Severity.choices,
            "by_severity": selectors.open_findings_by_severity(),
            "clusters": _cluster_names(),
        },
    )
