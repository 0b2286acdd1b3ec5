from django.apps import AppConfig


class FabricConfig(AppConfig):
    """The network between servers: switches, adapters, cables, snapshots, exports."""

    name = "fabric"
    verbose_name = "Fabric"
