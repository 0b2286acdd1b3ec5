from django.apps import AppConfig


class TopologyConfig(AppConfig):
    """Graphs built from inventory and clusters: interconnect, placement, failure domains."""

    name = "topology"
    verbose_name = "Topology"
