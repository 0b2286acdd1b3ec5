from django.urls import path

from .views import SnapshotView

urlpatterns = [
    # The clusters layer's endpoint, reached here first so jobs listings are routed.
    path("clusters/<slug:name>/snapshots/", SnapshotView.as_view(), name="cluster-snapshots"),
]
