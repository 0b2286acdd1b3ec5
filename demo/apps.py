from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo fleet (`manage.py demo`): the only app that imports `simulator/`."""

    name = "demo"
    verbose_name = "Demo"
