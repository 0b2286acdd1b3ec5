"""Health API representations. Meanings come from the XID catalog in memory, never a query."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from inventory.models import ChangeEvent, Gpu

from ..catalog import event_info
from ..models import GpuCounterSample, HealthEvent


class EventHolderSerializer(serializers.Serializer):
    """The workload that held the GPU when the episode began (copied by the workloads layer)."""

    workload_id = serializers.IntegerField()
    scheduler_id = serializers.CharField()
    kind = serializers.CharField(help_text="`slurm_job` or `pods`")
    cluster = serializers.CharField()
    user = serializers.CharField()
    account = serializers.CharField(help_text="the Slurm account or the pods' namespace")


class HealthEventSerializer(serializers.ModelSerializer):
    hostname = serializers.CharField(source="server.hostname", read_only=True)
    meaning = serializers.SerializerMethodField()
    workload = EventHolderSerializer(
        source="holder",
        read_only=True,
        allow_null=True,
        help_text="the job or pod on the GPU when it began; null when none is known",
    )

    class Meta:
        model = HealthEvent
        fields = [
            "id",
            "kind",
            "code",
            "server",
            "hostname",
            "gpu",
            "gpu_serial",
            "gpu_uuid",
            "pci_bus_id",
            "first_seen",
            "last_seen",
            "count",
            "severity",
            "action",
            "message",
            "meaning",
            "workload",
        ]

    @extend_schema_field(serializers.CharField())
    def get_meaning(self, event: HealthEvent) -> str:
        return event_info(event.kind, event.code, event.message).meaning


class CounterSampleSerializer(serializers.ModelSerializer):
    class Meta:
        model = GpuCounterSample
        exclude = ["current"]


class HistoryGpuSerializer(serializers.ModelSerializer):
    hostname = serializers.CharField(source="server.hostname", read_only=True)

    class Meta:
        model = Gpu
        fields = [
            "id",
            "uuid",
            "serial",
            "name",
            "server",
            "hostname",
            "index",
            "pci_bus_id",
            "status",
        ]


class PlacementSerializer(serializers.Serializer):
    server = serializers.IntegerField()
    hostname = serializers.CharField()
    pci_bus_id = serializers.CharField(allow_blank=True)
    index = serializers.IntegerField(allow_null=True)
    start = serializers.DateTimeField()
    end = serializers.DateTimeField(allow_null=True, help_text="null: it is there now")


class ReplacementSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    server = serializers.IntegerField()
    hostname = serializers.CharField()
    pci_bus_id = serializers.CharField(allow_blank=True)
    role = serializers.ChoiceField(choices=["installed", "removed"])
    removed = serializers.DictField()
    installed = serializers.DictField()


class OccupantSerializer(serializers.Serializer):
    gpu = serializers.IntegerField(allow_null=True)
    uuid = serializers.CharField(allow_blank=True)
    serial = serializers.CharField(allow_blank=True)
    start = serializers.DateTimeField(allow_null=True, help_text="null: before the history")
    end = serializers.DateTimeField(allow_null=True, help_text="null: it is there now")


class SlotSerializer(serializers.Serializer):
    server = serializers.IntegerField()
    hostname = serializers.CharField()
    pci_bus_id = serializers.CharField(allow_blank=True)
    occupants = OccupantSerializer(many=True)


class ChangeSerializer(serializers.ModelSerializer):
    hostname = serializers.CharField(source="server.hostname", read_only=True)

    class Meta:
        model = ChangeEvent
        fields = ["id", "kind", "summary", "server", "hostname", "gpu", "created_at"]


class GpuHistorySerializer(serializers.Serializer):
    """A GPU's lifecycle, followed by serial: placements, replacements, events, counters."""

    gpu = HistoryGpuSerializer()
    identity = serializers.CharField(help_text="serial:<serial>, or uuid:<uuid> without one")
    gpus = HistoryGpuSerializer(many=True, help_text="every GPU row of this board")
    placements = PlacementSerializer(many=True)
    replacements = ReplacementSerializer(many=True)
    slot = SlotSerializer(help_text="who sat in the GPU's current slot before it")
    changes = ChangeSerializer(many=True)
    events = HealthEventSerializer(many=True)
    counters = CounterSampleSerializer(many=True, help_text="the newest counter samples first")
