"""Dashboard pages of the physical layer: the server list and the GPU list."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse

from core.tables import Column, table_page

from . import selectors
from .choices import GpuStatus, ServerState
from .filters import GPU_HEALTH_CHOICES, GpuFilter, ServerFilter
from .models import Gpu, Server

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
    def context() -> dict:
        gpu_models = (
            Gpu.objects.exclude(status=GpuStatus.LOST)
            .exclude(name="")
            .order_by("name")
            .values_list("name", flat=True)
            .distinct()
        )
        racks = Server.objects.exclude(rack="").order_by("rack").values_list("rack", flat=True)
        return {
            "states": ServerState.choices,
            "gpu_models": list(gpu_models),
            "racks": list(racks.distinct()),
        }

    return table_page(
        request,
        queryset=ServerFilter(request.GET, queryset=selectors.server_list()).qs,
        columns=SERVER_COLUMNS,
        default_sort="hostname",
        template="inventory/server_list.html",
        filename="servers.csv",
        context=context,
    )


@login_required
def gpu_list(request: HttpRequest) -> HttpResponse:
    def context() -> dict:
        return {
            "statuses": GpuStatus.choices,
            "health_choices": GPU_HEALTH_CHOICES,
            "unhealthy": Gpu.objects.unhealthy().count(),
        }

    return table_page(
        request,
        queryset=GpuFilter(request.GET, queryset=selectors.gpu_list()).qs,
        columns=GPU_COLUMNS,
        default_sort="server__hostname",
        template="inventory/gpu_list.html",
        filename="gpus.csv",
        context=context,
    )
