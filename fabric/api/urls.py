from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import (
    AdapterViewSet,
    FabricFindingsView,
    FabricLinkViewSet,
    FabricServersView,
    FabricSnapshotView,
    FabricSnapshotViewSet,
    FabricViewSet,
    NodeNameMapView,
    SwitchViewSet,
)

router = SimpleRouter()
router.register("fabrics", FabricViewSet, basename="fabric")
router.register("switches", SwitchViewSet, basename="switch")
router.register("adapters", AdapterViewSet, basename="adapter")
router.register("fabric-links", FabricLinkViewSet, basename="fabric-link")
router.register("fabric-snapshots", FabricSnapshotViewSet, basename="fabric-snapshot")

urlpatterns = [
    path("fabrics/<slug:name>/snapshots/", FabricSnapshotView.as_view(), name="fabric-snapshots"),
    path(
        "fabrics/<slug:name>/node-name-map/", NodeNameMapView.as_view(), name="fabric-node-name-map"
    ),
    path("fabrics/<slug:name>/servers/", FabricServersView.as_view(), name="fabric-servers"),
    path("fabrics/<slug:name>/findings/", FabricFindingsView.as_view(), name="fabric-findings"),
    *router.urls,
]
