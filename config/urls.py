"""Top-level URLs: the dashboard pages, the API under /api/v1/, the OpenAPI schema."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from clusters import views as cluster_views
from inventory import views as inventory_views
from topology import views as topology_views
from topology import views_placement as placement_views

urlpatterns = [
    path("", topology_views.overview, name="overview"),
    path("servers/", inventory_views.server_list, name="server-list"),
    path("servers/<int:pk>/", topology_views.server_detail, name="server-detail"),
    path("gpus/", inventory_views.gpu_list, name="gpu-list"),
    path("nodes/", cluster_views.node_list, name="node-list"),
    path("findings/", cluster_views.finding_list, name="finding-list"),
    path("topology/", topology_views.topology, name="topology"),
    path("placement/", placement_views.placement_page, name="placement"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/", include("inventory.api.urls")),
    path("api/v1/", include("clusters.api.urls")),
    path("api/v1/", include("topology.api.urls")),
    path("api/v1/", include("health.api.urls")),
]
