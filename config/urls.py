"""Top-level URLs: the dashboard pages, and everything under /api/ in the `api` namespace.

Pages and API routes never share a URL name: the DRF routers name their routes after the
resource (`server-list`, `server-detail`), which are also the pages' names, and `reverse()`
would hand a page link the API's path. Pages keep plain names (`{% url 'server-list' %}`);
the API is reversed as `api:server-list`. tests/pages/test_urls.py holds both rules.
"""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import URLPattern, URLResolver, include, path

from clusters import views as cluster_views
from core.api.schema_views import SchemaView, api_docs
from core.db.bounds import server_error
from core.not_found import page_not_found
from fabric import views as fabric_views
from findings import views as finding_views
from health import views as health_views
from integrations import views as integrations_views
from inventory import views as inventory_views
from placement import views as placement_views
from topology import views as topology_views
from workloads import views as workload_views

api_patterns: list[URLPattern | URLResolver] = [
    path("schema/", SchemaView.as_view(), name="schema"),
    path("docs/", api_docs, name="docs"),
    path("v1/", include("inventory.api.urls")),
    path("v1/", include("workloads.api.urls")),  # before clusters: it routes jobs listings
    path("v1/", include("clusters.api.urls")),
    path("v1/", include("findings.api.urls")),
    path("v1/", include("fabric.api.urls")),
    path("v1/", include("health.api.urls")),
    path("v1/", include("topology.api.urls")),
    path("v1/", include("placement.api.urls")),
    path("v1/", include("integrations.api.urls")),
]

urlpatterns = [
    path("", topology_views.overview, name="overview"),
    path("servers/", inventory_views.server_list, name="server-list"),
    path("servers/<int:pk>/", topology_views.server_detail, name="server-detail"),
    path("gpus/", health_views.gpu_list, name="gpu-list"),
    path("nodes/", cluster_views.node_list, name="node-list"),
    path("nodes/<int:pk>/", topology_views.node_detail, name="node-detail"),
    path("workloads/", workload_views.workload_list, name="workload-list"),
    path("workloads/<int:pk>/", topology_views.workload_detail, name="workload-detail"),
    path("findings/", finding_views.finding_list, name="finding-list"),
    path("findings/<int:pk>/", finding_views.finding_detail, name="finding-detail"),
    path("docs/findings/", finding_views.runbook, name="runbook-findings"),
    path("topology/", topology_views.topology, name="topology"),
    path("search/", topology_views.search, name="search"),
    path("placement/", placement_views.placement_page, name="placement"),
    path("health/", health_views.health_page, name="health"),
    path("gpus/<int:pk>/", topology_views.gpu_detail, name="gpu-detail"),
    path("fabric/", topology_views.fabric_page, name="fabric"),
    path("fabric/switches/<int:pk>/", fabric_views.switch_detail, name="fabric-switch-detail"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("metrics", integrations_views.metrics, name="metrics"),
    path("webhooks/", include("integrations.urls")),
    path("api/", include((api_patterns, "api"))),
]

handler404 = page_not_found
handler500 = server_error  # a database away or too slow: 503 with Retry-After
"""Unknown routes and ids: the app's page with its menu; JSON under /api/ (core/not_found.py)."""
