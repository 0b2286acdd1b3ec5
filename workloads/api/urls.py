from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import SnapshotView, WorkloadViewSet

router = SimpleRouter()
router.register("workloads", WorkloadViewSet, basename="workload")

urlpatterns = [
    # The clusters layer's endpoint, reached here first so jobs listings are routed.
    path("clusters/<slug:name>/snapshots/", SnapshotView.as_view(), name="cluster-snapshots"),
    *router.urls,
]
