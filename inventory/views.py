"""Dashboard pages of the physical layer: the server list and the GPU list."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from core.tables import table_page

from . import selectors
from .filters import GpuFilter, ServerFilter
from .tables import GPU_FILTERS, GPU_TABLE, SERVER_FILTERS, SERVER_TABLE


@login_required
def server_list(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    return table_page(
        request,
        table=SERVER_TABLE,
        filterset=ServerFilter(request.GET, queryset=selectors.server_list()),
        filters=SERVER_FILTERS,
        known=lambda: {
            "model": selectors.gpu_model_names(),
            "rack": selectors.rack_names(),
            "cluster": selectors.bound_cluster_names(),
        },
        template="inventory/server_list.html",
    )


@login_required
def gpu_list(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    return table_page(
        request,
        table=GPU_TABLE,
        filterset=GpuFilter(request.GET, queryset=selectors.gpu_list()),
        filters=GPU_FILTERS,
        template="inventory/gpu_list.html",
        context=lambda: {"unhealthy": selectors.unhealthy_gpu_count()},
    )
