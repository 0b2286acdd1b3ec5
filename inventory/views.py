"""Dashboard pages of the physical layer: the server list and the GPU list."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from . import selectors
from .choices import GpuStatus, ServerState
from .filters import GpuFilter, ServerFilter
from .models import Gpu, Server
from .tables import Column, csv_response, paginate, query_without, sort_queryset

SERVER_COLUMNS = [
    Column("Hostname", "hostname", lambda s: s.hostname),
    Column("State", "state_value", lambda s: s.state_value),
    Column("GPUs", "gpu_count", lambda s: s.gpu_count, numeric=True),
    Column("Lost GPUs", "lost_gpu_count", lambda s: s.lost_gpu_count, numeric=True),
    Column("MIG devices", "mig_device_count", lambda s: s.mig_device_count, numeric=True),
    Column("Vendor / product", "product", lambda s: f"{s.vendor} {s.product}".strip()),
    Column("Driver", "driver_version", lambda s: s.driver_version),
    Column("Rack", "rack", lambda s: s.rack),
    Column("Last seen", "last_seen", lambda s: s.last_seen.isoformat() if s.last_seen else ""),
    Column("System UUID", None, lambda s: s.system_uuid),
    Column("Virtual", None, lambda s: s.is_virtual),
]

GPU_COLUMNS = [
    Column("Server", "server__hostname", lambda g: g.server.hostname),
    Column("Index", "index", lambda g: g.index, numeric=True),
    Column("Model", "name", lambda g: g.name),
    Column("Memory", "memory_total_bytes", lambda g: g.memory_total_bytes, numeric=True),
    Column("MIG", "mig_mode_current", lambda g: g.mig_mode_current),
    Column("MIG devices", "mig_device_count", lambda g: g.mig_device_count, numeric=True),
    Column("Status", "status", lambda g: g.status),
    Column("PCI bus", "pci_bus_id", lambda g: g.pci_bus_id),
    Column("Serial", "serial", lambda g: g.serial),
    Column("UUID", "uuid", lambda g: g.uuid),
]


@login_required
def server_list(request: HttpRequest) -> HttpResponse:
    filterset = ServerFilter(request.GET, queryset=selectors.server_list())
    queryset, sort = sort_queryset(request, filterset.qs, SERVER_COLUMNS, "hostname")
    if request.GET.get("format") == "csv":
        return csv_response("servers.csv", SERVER_COLUMNS, queryset.iterator(chunk_size=2000))
    page = paginate(request, queryset)
    gpu_models = (
        Gpu.objects.exclude(status=GpuStatus.LOST)
        .exclude(name="")
        .order_by("name")
        .values_list("name", flat=True)
        .distinct()
    )
    racks = (
        Server.objects.exclude(rack="").order_by("rack").values_list("rack", flat=True).distinct()
    )
    return render(
        request,
        "inventory/server_list.html",
        {
            "page": page,
            "columns": SERVER_COLUMNS,
            "sort": sort,
            "filters": filterset.form,
            "states": ServerState.choices,
            "gpu_models": list(gpu_models),
            "racks": list(racks),
            "query": query_without(request, "page", "format"),
            "sort_query": query_without(request, "page", "format", "sort"),
        },
    )


@login_required
def gpu_list(request: HttpRequest) -> HttpResponse:
    filterset = GpuFilter(request.GET, queryset=selectors.gpu_list())
    queryset, sort = sort_queryset(request, filterset.qs, GPU_COLUMNS, "server__hostname")
    if request.GET.get("format") == "csv":
        return csv_response("gpus.csv", GPU_COLUMNS, queryset.iterator(chunk_size=2000))
    page = paginate(request, queryset)
    return render(
        request,
        "inventory/gpu_list.html",
        {
            "page": page,
            "columns": GPU_COLUMNS,
            "sort": sort,
            "statuses": GpuStatus.choices,
            "unhealthy": Gpu.objects.filter(
                Q(status__in=[GpuStatus.LOST, GpuStatus.ERROR])
                | Q(remapped_rows_failure=True)
                | Q(retired_pages_pending=True)
            ).count(),
            "query": query_without(request, "page", "format"),
            "sort_query": query_without(request, "page", "format", "sort"),
        },
    )
