"""What the placement app stores: a per-server summary of what placement reads.

Derived data, rebuilt from the inventory's rows (`placement.summaries`): losing every row
costs one rebuild, never an answer.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class ServerPlacement(models.Model):
    """What placement and failure domains need of one server, built from its GPU, link and
    MIG rows (`placement.summaries`), so a query reads one row per server instead of
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
        db_table = "topology_serverplacement"  # made by the topology app, before placement was one
        ordering = ["server_id"]

    def __str__(self) -> str:
        return f"placement of server {self.server_id}@{self.stamp[:8]}"


class LeafPlacement(models.Model):
    """The servers of one leaf (or leaf group) under one spine group (`placement.leaves`), so
    a multi-node question reads a row per leaf instead of every server cable.

    Derived from the fabric's cables (`placement.leaf_summaries`), rebuilt when the fabric
    revision moves. The row with an empty `leaf` marks the build: its `stamp` is the fabric
    revision the rows were built from, and a read that finds another revision (or no marker)
    takes the cables instead, so answers never depend on whether the summaries are fresh.
    """

    leaf = models.CharField(max_length=300, help_text="the leaf key (`fabric.places.Place`)")
    leaf_name = models.CharField(max_length=300, blank=True, default="")
    spine = models.CharField(max_length=64, blank=True, default="", help_text='"": none')
    spine_name = models.CharField(max_length=300, blank=True, default="")
    servers = models.TextField(default="[]", help_text="JSON [server id, ...], in id order")
    stamp = models.CharField(max_length=64, help_text="the fabric revision built from")
    built_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["leaf", "spine"]
        constraints = [
            models.UniqueConstraint(fields=["leaf", "spine"], name="leaf_placement_unique")
        ]

    def __str__(self) -> str:
        return f"placement of leaf {self.leaf or '(marker)'}@{self.stamp}"
