from django.apps import AppConfig


class HealthConfig(AppConfig):
    """GPU health and lifecycle: kernel-log events, counters over time, rules, history."""

    name = "health"
    verbose_name = "GPU health"
