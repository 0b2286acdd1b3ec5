from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import ClusterViewSet, NodeViewSet, SnapshotDetailView, SnapshotView

router = SimpleRouter()
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("nodes", NodeViewSet, basename="node")

urlpatterns = [
    path("clusters/<slug:name>/snapshots/", SnapshotView.as_view(), name="cluster-snapshots"),
    path(
        "clusters/<slug:name>/snapshots/<int:pk>/",
        SnapshotDetailView.as_view(),
        name="cluster-snapshot-detail",
    ),
    *router.urls,
]
