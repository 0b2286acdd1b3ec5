"""Dashboard pages of the scheduler layer: nodes beside their servers, and findings."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from inventory.models import HardwareProfile
from inventory.selectors import hardware_profile_for
from inventory.tables import Column, csv_response, paginate, query_without, sort_queryset

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


@login_required
def node_list(request: HttpRequest) -> HttpResponse:
    filterset = NodeFilter(request.GET, queryset=selectors.node_list())
    queryset, sort = sort_queryset(request, filterset.qs, NODE_COLUMNS, "cluster__name")
    if request.GET.get("format") == "csv":
        rows = _with_expected(list(queryset))
        return csv_response("nodes.csv", NODE_COLUMNS, rows)
    page = paginate(request, queryset)
    page.object_list = _with_expected(list(page.object_list))
    return render(
        request,
        "clusters/node_list.html",
        {
            "page": page,
            "columns": NODE_COLUMNS,
            "sort": sort,
            "clusters": Cluster.objects.order_by("name").values_list("name", flat=True),
            "kinds": ClusterKind.choices,
            "query": query_without(request, "page", "format"),
            "sort_query": query_without(request, "page", "format", "sort"),
        },
    )


@login_required
def finding_list(request: HttpRequest) -> HttpResponse:
    params = request.GET.copy()
    if "open" not in params:
        params["open"] = "true"
    filterset = FindingFilter(params, queryset=selectors.finding_list())
    queryset, sort = sort_queryset(request, filterset.qs, FINDING_COLUMNS, "-last_seen")
    if request.GET.get("format") == "csv":
        return csv_response("findings.csv", FINDING_COLUMNS, queryset.iterator(chunk_size=2000))
    page = paginate(request, queryset)
    return render(
        request,
        "clusters/finding_list.html",
        {
            "page": page,
            "columns": FINDING_COLUMNS,
            "sort": sort,
            "open": params["open"],
            "types": FindingType.choices,
            "severities": Severity.choices,
            "by_severity": selectors.open_findings_by_severity(),
            "by_type": selectors.open_findings_by_type(),
            "clusters": Cluster.objects.order_by("name").values_list("name", flat=True),
            "query": query_without(request, "page", "format"),
            "sort_query": query_without(request, "page", "format", "sort"),
        },
    )
