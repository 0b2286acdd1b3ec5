"""The workloads list page; one workload's page is topology's (it draws server figures)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from clusters.selectors import cluster_names
from core.tables import table_page

from . import selectors
from .filters import WorkloadFilter
from .tables import WORKLOAD_FILTERS, WORKLOAD_TABLE


@login_required
def workload_list(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """`/workloads/`: filtered as the API is; `?format=csv` exports the whole filtered set."""
    return table_page(
        request,
        table=WORKLOAD_TABLE,
        filterset=WorkloadFilter(request.GET, queryset=selectors.workload_rows()),
        filters=WORKLOAD_FILTERS,
        known=lambda: {"cluster": cluster_names(), "gpu_model": selectors.gpu_models()},
        template="workloads/workload_list.html",
    )
