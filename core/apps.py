from django.apps import AppConfig


class CoreConfig(AppConfig):
    """What every app shares: tables, filters, template tags, API pagination, errors, schema.

    Imports no other app of the project: the arrow points from the apps to core.
    """

    name = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        from core.db import bounds  # noqa: F401  (connects the statement timeout's receiver)
