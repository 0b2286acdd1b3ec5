from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import ClusterViewSet, NodeViewSet, SnapshotDetailView

router = SimpleRouter()
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("nodes", NodeViewSet, basename="node")

# `POST clusters/{name}/snapshots/` is routed by the workloads layer (workloads/api/urls.py),
# which takes jobs listings and hands the rest to this layer's SnapshotView.
urlpatterns = [
    path(
        "clusters/<slug:name>/snapshots/<int:pk>/",
        SnapshotDetailView.as_view(),
        name="cluster-snapshot-detail",
    ),
    *router.urls,
]
