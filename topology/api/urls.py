from django.urls import path

from .fabric import (
    ClusterTopologyView,
    FabricKubernetesLabelsView,
    FabricTopologyConfView,
    FabricTopologyYamlView,
)
from .figures import FigureListView, FigureView
from .interconnect import ServerInterconnectView

urlpatterns = [
    path("topology/servers/<int:pk>/", ServerInterconnectView.as_view(), name="server-topology"),
    path("figures/", FigureListView.as_view(), name="figure-list"),
    path("figures/<slug:name>/", FigureView.as_view(), name="figure-detail"),
    path(
        "fabrics/<slug:name>/topology.conf",
        FabricTopologyConfView.as_view(),
        name="fabric-topology-conf",
    ),
    path(
        "fabrics/<slug:name>/topology.yaml",
        FabricTopologyYamlView.as_view(),
        name="fabric-topology-yaml",
    ),
    path(
        "fabrics/<slug:name>/kubernetes-labels/",
        FabricKubernetesLabelsView.as_view(),
        name="fabric-kubernetes-labels",
    ),
    path("clusters/<slug:name>/topology/", ClusterTopologyView.as_view(), name="cluster-topology"),
]
