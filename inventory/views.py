"""Dashboard pages of the physical layer: the server list. (The GPU list, `/gpus/`, is served by
`health.views.gpu_list`: it shows why each GPU needs action, which is health's rule.)"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from core.tables import table_page

from . import selectors
from .filters import ServerFilter
from .tables import SERVER_FILTERS, SERVER_TABLE


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
