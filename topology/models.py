"""What the topology layer stores: the last render of each fleet figure.

A database row rather than Django's cache: it survives restarts, every web worker and Celery
worker sees the same one, and a page can serve it at once while a newer one renders.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class RenderedFigure(models.Model):
    """The latest render of one fleet figure and the data revision it was built from.

    `revision` names the inventory revision, the node-set revision and the last
    reconciliation the figure saw (see `topology.render.fleet_revision`); a figure whose
    revision is not the current one is stale and is served while its successor renders.
    """

    name = models.CharField(max_length=64, unique=True)
    revision = models.CharField(max_length=100)
    figure = models.JSONField()
    rendered_at = models.DateTimeField(default=timezone.now)
    duration_ms = models.PositiveIntegerField(default=0, help_text="building it, queries included")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name}@{self.revision}"
