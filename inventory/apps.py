from django.apps import AppConfig


class InventoryConfig(AppConfig):
    """The physical truth: servers, GPUs, MIG devices, NICs, links, reports, agent tokens."""

    name = "inventory"
    verbose_name = "Inventory"
