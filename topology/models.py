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


class ServerPlacement(models.Model):
    """What placement and failure domains need of one server, built from its GPU, link and
    MIG rows (`topology.placement.summaries`), so a query reads one row per server instead of
    eight GPU rows and their links.

    `stamp` is the server's `last_report_hash` it was built from: a summary whose stamp is not
    the server's current hash is stale, and the reads take that server's rows instead (answers
    never depend on whether a summary is fresh). Health findings are not in it: the reads
    overlay the open ones (`health.selectors`), which are few and change on their own clock.
    """

    server = models.OneToOneField(
        "inventory.Server", primary_key=True, on_delete=models.CASCADE, related_name="placement"
    )
    stamp = models.CharField(max_length=64)
    usable = models.PositiveIntegerField(help_text="GPUs healthy and outside MIG mode")
    known = models.PositiveIntegerField(help_text="GPUs not lost")
    built_at = models.DateTimeField(default=timezone.now)
    shape = models.CharField(
        max_length=32,
        default="",
        help_text="a digest of the summary without ids and UUIDs: servers alike share it",
    )
    # the small columns first: the reads of every node row join them, and on SQLite a column
    # after a long one costs a walk past it
    gpus = models.TextField(
        default="", help_text="JSON [[id, index, name, memory, numa, state], ...]"
    )
    links = models.TextField(
        default="",
        help_text='the one link class (NV18), "" for none, or JSON {"classes", "pairs"} when mixed',
    )
    migs = models.TextField(default="", help_text="JSON [[uuid, gpu_id, profile, memory], ...]")

    class Meta:
        ordering = ["server_id"]

    def __str__(self) -> str:
        return f"placement of server {self.server_id}@{self.stamp[:8]}"
