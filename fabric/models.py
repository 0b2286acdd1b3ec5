"""The fabric between servers: switches, adapters (NICs, routers, switch-internal nodes),
cables, and the snapshots they came from.

Switches and adapters are keyed by GUID within their fabric and kept across snapshots:
absent from the last snapshot, they are marked gone (`gone_at`), not deleted, so history
("this port was up and is gone") is answerable. GUIDs are 16 lower-case hex digits.
"""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from inventory.models import Server

from .choices import AdapterRole, BindingMethod, FabricKind, LinkState, NodeKind, SnapshotStatus


class Fabric(models.Model):
    """One InfiniBand subnet as ibnetdiscover sees it, with its node-name map; or the
    Ethernet switches the servers' agents hear over LLDP (`kind` ethernet)."""

    name = models.SlugField(max_length=100, unique=True)
    kind = models.CharField(
        max_length=16, choices=FabricKind.choices, default=FabricKind.INFINIBAND
    )
    node_name_map = models.TextField(blank=True, default="", help_text="ibnetdiscover format")
    node_names = models.JSONField(default=dict, blank=True, help_text="the map read: GUID -> name")
    node_name_map_updated_at = models.DateTimeField(null=True, blank=True)
    last_snapshot = models.ForeignKey(
        "FabricSnapshot", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    applied_at = models.DateTimeField(null=True, blank=True, help_text="the last good snapshot")
    summary = models.JSONField(default=dict, blank=True, help_text="tiers, rails, leaf groups")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class FabricSnapshot(models.Model):
    """A pushed or imported ibnetdiscover output: the raw text, and what became of it."""

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="snapshots")
    format = models.CharField(max_length=32, blank=True, default="")
    status = models.CharField(max_length=16, choices=SnapshotStatus.choices)
    error = models.TextField(blank=True, default="")
    raw = models.TextField(blank=True, default="", help_text="emptied past the retention")
    size_bytes = models.PositiveBigIntegerField(default=0)
    content_hash = models.CharField(max_length=64, blank=True, default="")
    received_at = models.DateTimeField(default=timezone.now)
    switch_count = models.PositiveIntegerField(default=0)
    adapter_count = models.PositiveIntegerField(default=0)
    link_count = models.PositiveIntegerField(default=0, help_text="cables up")
    ports_down = models.PositiveIntegerField(default=0)
    added = models.PositiveIntegerField(default=0, help_text="switches, adapters, cables new")
    gone = models.PositiveIntegerField(default=0, help_text="switches, adapters, cables gone")

    class Meta:
        ordering = ["-received_at", "-id"]
        indexes = [models.Index(fields=["fabric", "-received_at"])]

    def __str__(self) -> str:
        return f"{self.fabric_id} {self.format} {self.status} {self.received_at:%Y-%m-%d %H:%M}"


class Switch(models.Model):
    """An InfiniBand switch. `tier` counts up from leaves (1); people may override it."""

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="switches")
    guid = models.CharField(max_length=16)
    description = models.CharField(max_length=256, blank=True, default="")
    name = models.CharField(max_length=256, blank=True, default="")
    lid = models.PositiveIntegerField(null=True, blank=True)
    system_guid = models.CharField(max_length=16, blank=True, default="")
    port_count = models.PositiveSmallIntegerField(null=True, blank=True)
    ports_used = models.PositiveSmallIntegerField(default=0, help_text="ports with a cable up")
    tier_inferred = models.PositiveSmallIntegerField(null=True, blank=True)
    tier_override = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(9)],
        help_text="set by a person; wins over the inferred tier",
    )
    rail = models.PositiveSmallIntegerField(null=True, blank=True)
    leaf_group = models.PositiveSmallIntegerField(null=True, blank=True)
    down_gbps = models.FloatField(default=0.0, help_text="to adapters and lower tiers")
    up_gbps = models.FloatField(default=0.0, help_text="to higher tiers")
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    gone_at = models.DateTimeField(null=True, blank=True, help_text="absent from the last snapshot")

    class Meta:
        ordering = ["fabric_id", "name", "guid"]
        constraints = [
            models.UniqueConstraint(fields=["fabric", "guid"], name="fabric_switch_guid"),
        ]
        indexes = [models.Index(fields=["fabric", "gone_at"])]

    def __str__(self) -> str:
        return self.name or self.guid

    @property
    def tier(self) -> int | None:
        return self.tier_override or self.tier_inferred


class Adapter(models.Model):
    """A channel adapter (a server's NIC, or a switch's SHARP aggregation node) or a router.

    `guid` is the node GUID; from a ports report (`-p`), which names no node GUID, it is the
    port's GUID (`node_guid_known` False).
    """

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="adapters")
    guid = models.CharField(max_length=16)
    kind = models.CharField(max_length=8, choices=NodeKind.choices, default=NodeKind.CA)
    role = models.CharField(max_length=16, choices=AdapterRole.choices, default=AdapterRole.HOST)
    node_guid_known = models.BooleanField(default=True)
    description = models.CharField(max_length=256, blank=True, default="")
    host_name = models.CharField(max_length=253, blank=True, default="", db_index=True)
    nic = models.CharField(max_length=64, blank=True, default="", help_text="e.g. mlx5_0, HCA-1")
    system_guid = models.CharField(max_length=16, blank=True, default="")
    port_count = models.PositiveSmallIntegerField(null=True, blank=True)
    port_guids = models.JSONField(default=list, blank=True)
    server = models.ForeignKey(
        Server, null=True, blank=True, on_delete=models.SET_NULL, related_name="fabric_adapters"
    )
    binding_method = models.CharField(
        max_length=16, choices=BindingMethod.choices, blank=True, default=BindingMethod.NONE
    )
    rail = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="the NIC's rail: its leaf's where known, else its name's"
    )
    nic_rail = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="the rail its NIC label names (NIC k: rail k)"
    )
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    gone_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["fabric_id", "host_name", "nic", "guid"]
        constraints = [
            models.UniqueConstraint(fields=["fabric", "guid"], name="fabric_adapter_guid"),
        ]
        indexes = [models.Index(fields=["fabric", "gone_at"]), models.Index(fields=["server"])]

    def __str__(self) -> str:
        return self.description or self.guid


class FabricLink(models.Model):
    """A cable between two ports, or a port with nothing up at its far end (`down`).

    End `a` is the switch whenever the cable touches one; `key` names both ends by GUID and
    port, so the same cable is the same row across snapshots.
    """

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="links")
    key = models.CharField(max_length=80)
    a_switch = models.ForeignKey(
        Switch, null=True, blank=True, on_delete=models.CASCADE, related_name="a_links"
    )
    a_adapter = models.ForeignKey(
        Adapter, null=True, blank=True, on_delete=models.CASCADE, related_name="a_links"
    )
    a_port = models.PositiveSmallIntegerField()
    a_port_name = models.CharField(
        max_length=64, blank=True, default="", help_text="an Ethernet port's name (LLDP)"
    )
    a_lid = models.PositiveIntegerField(null=True, blank=True)
    b_switch = models.ForeignKey(
        Switch, null=True, blank=True, on_delete=models.CASCADE, related_name="b_links"
    )
    b_adapter = models.ForeignKey(
        Adapter, null=True, blank=True, on_delete=models.CASCADE, related_name="b_links"
    )
    b_port = models.PositiveSmallIntegerField(null=True, blank=True)
    b_lid = models.PositiveIntegerField(null=True, blank=True)
    width = models.CharField(max_length=4, help_text="lanes: 1x, 2x, 4x, 8x, 12x, ??")
    lane_speed = models.CharField(max_length=8, help_text="SDR ... NDR, XDR; ??? unknown")
    gbps = models.FloatField(null=True, blank=True)
    state = models.CharField(max_length=8, choices=LinkState.choices)
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    gone_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["fabric_id", "key"]
        constraints = [
            models.UniqueConstraint(fields=["fabric", "key"], name="fabric_link_key"),
            models.CheckConstraint(
                condition=Q(a_switch__isnull=False, a_adapter__isnull=True)
                | Q(a_switch__isnull=True, a_adapter__isnull=False),
                name="fabric_link_one_a_end",
            ),
            models.CheckConstraint(
                condition=Q(b_switch__isnull=True) | Q(b_adapter__isnull=True),
                name="fabric_link_at_most_one_b_end",
            ),
        ]
        indexes = [models.Index(fields=["fabric", "gone_at"])]

    def __str__(self) -> str:
        return self.key

    @property
    def speed(self) -> str:
        return f"{self.width}{self.lane_speed}"


class FabricFigure(models.Model):
    """A fabric's figure at switch level or above, rendered once per revision of what it
    draws and stored (see `fabric.render`): summing every cable of a large fabric takes
    seconds, reading this one row does not."""

    fabric = models.OneToOneField(
        Fabric, on_delete=models.CASCADE, primary_key=True, related_name="rendered_figure"
    )
    revision = models.CharField(max_length=64)
    figure = models.JSONField(default=dict)
    rendered_at = models.DateTimeField(default=timezone.now)
    duration_ms = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.fabric_id} {self.revision}"
