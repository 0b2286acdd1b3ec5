from django.apps import AppConfig


class PlacementConfig(AppConfig):
    """Where a job fits now, what a failure takes with it, dense or sparse servers."""

    name = "placement"
    verbose_name = "Placement"
