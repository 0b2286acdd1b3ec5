from django.apps import AppConfig


class TopologyConfig(AppConfig):
    """Figures and pages across the layers, one server's interconnect, the clusters–fabric join."""

    name = "topology"
    verbose_name = "Topology"
