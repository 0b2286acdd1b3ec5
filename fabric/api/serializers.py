"""Fabric API shapes. Names, GUIDs, tiers and rates as stored; ends of a cable nested."""

from __future__ import annotations

from rest_framework import serializers

from ..graph import tier_name
from ..models import Adapter, Fabric, FabricLink, FabricSnapshot, Switch


class SnapshotSummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = FabricSnapshot
        fields = [
            "id",
            "format",
            "status",
            "received_at",
            "switch_count",
            "adapter_count",
            "link_count",
            "ports_down",
        ]


class FabricSerializer(serializers.ModelSerializer):
    last_snapshot = SnapshotSummarySerializer(read_only=True)
    node_name_map_entries = serializers.SerializerMethodField()

    class Meta:
        model = Fabric
        fields = [
            "id",
            "name",
            "kind",
            "applied_at",
            "last_snapshot",
            "summary",
            "node_name_map_entries",
            "node_name_map_updated_at",
            "created_at",
        ]

    def get_node_name_map_entries(self, fabric: Fabric) -> int:
        return len(fabric.node_names or {})


class FabricSnapshotSerializer(serializers.ModelSerializer):
    fabric: serializers.SlugRelatedField[Fabric] = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )

    class Meta:
        model = FabricSnapshot
        fields = [
            "id",
            "fabric",
            "format",
            "status",
            "error",
            "received_at",
            "size_bytes",
            "content_hash",
            "switch_count",
            "adapter_count",
            "link_count",
            "ports_down",
            "added",
            "gone",
        ]


class SwitchSerializer(serializers.ModelSerializer):
    fabric: serializers.SlugRelatedField[Fabric] = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )
    tier = serializers.IntegerField(read_only=True, allow_null=True)
    tier_name = serializers.SerializerMethodField()
    oversubscription = serializers.SerializerMethodField()

    class Meta:
        model = Switch
        fields = [
            "id",
            "fabric",
            "name",
            "guid",
            "description",
            "tier",
            "tier_name",
            "tier_inferred",
            "tier_override",
            "rail",
            "leaf_group",
            "port_count",
            "ports_used",
            "lid",
            "down_gbps",
            "up_gbps",
            "oversubscription",
            "first_seen",
            "last_seen",
            "gone_at",
        ]
        read_only_fields = [f for f in fields if f != "tier_override"]

    def get_tier_name(self, switch: Switch) -> str:
        return tier_name(switch.tier)

    def get_oversubscription(self, switch: Switch) -> float | None:
        """Down over up bandwidth (2.0 is 2:1); null for a switch with nothing above it."""
        return round(switch.down_gbps / switch.up_gbps, 3) if switch.up_gbps else None


class TierOverrideSerializer(serializers.Serializer):
    tier_override = serializers.IntegerField(min_value=1, max_value=9, allow_null=True)


class AdapterSerializer(serializers.ModelSerializer):
    fabric: serializers.SlugRelatedField[Fabric] = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )
    server_hostname = serializers.CharField(
        source="server.hostname", read_only=True, allow_null=True, default=None
    )

    class Meta:
        model = Adapter
        fields = [
            "id",
            "fabric",
            "guid",
            "kind",
            "role",
            "node_guid_known",
            "description",
            "host_name",
            "nic",
            "port_guids",
            "port_count",
            "server",
            "server_hostname",
            "binding_method",
            "rail",
            "first_seen",
            "last_seen",
            "gone_at",
        ]


class LinkEndSerializer(serializers.Serializer):
    """One end of a cable: a switch port or an adapter (server NIC) port."""

    kind = serializers.ChoiceField(choices=["switch", "adapter"])
    id = serializers.IntegerField()
    name = serializers.CharField()
    guid = serializers.CharField()
    port = serializers.IntegerField()
    port_name = serializers.CharField(help_text="an Ethernet switch port's name (LLDP); else empty")
    lid = serializers.IntegerField(allow_null=True)
    server = serializers.IntegerField(allow_null=True)
    server_hostname = serializers.CharField(allow_null=True)


def _end(
    switch: Switch | None, adapter: Adapter | None, port, lid, port_name: str = ""
) -> dict | None:
    node: Switch | Adapter
    if switch is not None:
        node, name = switch, switch.name
    elif adapter is not None:
        node, name = adapter, adapter.host_name or adapter.description
    else:
        return None
    server = adapter.server if adapter is not None else None
    return {
        "kind": "switch" if switch is not None else "adapter",
        "id": node.pk,
        "name": name,
        "guid": node.guid,
        "port": port,
        "port_name": port_name,
        "lid": lid,
        "server": server.pk if server else None,
        "server_hostname": server.hostname if server else None,
    }


class FabricLinkSerializer(serializers.ModelSerializer):
    fabric: serializers.SlugRelatedField[Fabric] = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )
    a = serializers.SerializerMethodField()
    b = serializers.SerializerMethodField()
    speed = serializers.CharField(read_only=True)

    class Meta:
        model = FabricLink
        fields = [
            "id",
            "fabric",
            "key",
            "a",
            "b",
            "width",
            "lane_speed",
            "speed",
            "gbps",
            "state",
            "first_seen",
            "last_seen",
            "gone_at",
        ]

    def get_a(self, link: FabricLink) -> dict:
        return _end(  # type: ignore[return-value]
            link.a_switch, link.a_adapter, link.a_port, link.a_lid, link.a_port_name
        )

    def get_b(self, link: FabricLink) -> dict | None:
        return _end(link.b_switch, link.b_adapter, link.b_port, link.b_lid)


class FabricSnapshotResultSerializer(serializers.Serializer):
    fabric = serializers.CharField()
    snapshot = serializers.IntegerField()
    format = serializers.CharField()
    switches = serializers.IntegerField()
    adapters = serializers.IntegerField()
    links_up = serializers.IntegerField()
    ports_down = serializers.IntegerField()
    added = serializers.IntegerField()
    gone = serializers.IntegerField()
    unbound = serializers.IntegerField()


class NameMapResultSerializer(serializers.Serializer):
    fabric = serializers.CharField()
    entries = serializers.IntegerField()
    renamed = serializers.IntegerField()
    bound = serializers.IntegerField()
    unbound = serializers.IntegerField()


class RejectedSerializer(serializers.Serializer):
    detail = serializers.CharField()
    # The metaclass moves declared fields off the class, so `Serializer.errors` (a property
    # in the stubs) is not overridden at run time.
    errors = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField())
    )


class ServerBandwidthSerializer(serializers.Serializer):
    server = serializers.IntegerField(source="server_id", allow_null=True)
    hostname = serializers.CharField()
    nics = serializers.IntegerField()
    gbps = serializers.FloatField()
    gpus = serializers.IntegerField(allow_null=True)
    gbps_per_gpu = serializers.FloatField(allow_null=True)
    nics_per_gpu = serializers.FloatField(allow_null=True)
    pix_nics_per_gpu = serializers.FloatField(
        allow_null=True, help_text="NICs on a PCIe switch with a GPU (PIX), per GPU"
    )
    leaves = serializers.ListField(child=serializers.CharField())


class FabricFindingSerializer(serializers.Serializer):
    type = serializers.CharField()
    severity = serializers.CharField()
    subject = serializers.CharField()
    message = serializers.CharField()
    server = serializers.IntegerField(source="server_id", allow_null=True)
    details = serializers.DictField()
