"""The workloads API's shapes, exactly the fields of DESIGN.md ("Workloads")."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..choices import Verdict
from ..describe import by_node, shown_allocations
from ..models import Workload


class AllocationGpuSerializer(serializers.Serializer):
    index = serializers.IntegerField(allow_null=True, help_text="the scheduler's index on the node")
    uuid = serializers.CharField(allow_null=True, help_text="the GPU or MIG UUID, if known")
    gpu = serializers.IntegerField(allow_null=True, help_text="the GPU's id")
    mig_device = serializers.IntegerField(allow_null=True, help_text="the MIG device's id")


class AllocationNodeSerializer(serializers.Serializer):
    node = serializers.CharField(help_text="the scheduler's node name")
    node_id = serializers.IntegerField(allow_null=True)
    server = serializers.IntegerField(allow_null=True, help_text="the server's id")
    gpus = AllocationGpuSerializer(many=True)


class LocalitySerializer(serializers.Serializer):
    within_node = serializers.CharField(
        allow_null=True,
        help_text="the worst link between its GPUs on any one node (NV#, PIX, PXB, PHB, "
        "NODE, SYS); null for one GPU",
    )
    switch_hops = serializers.IntegerField(
        allow_null=True,
        help_text="the most switches between two of its nodes; 0 on one node, null without "
        "a fabric",
    )
    verdict = serializers.ChoiceField(choices=Verdict.choices)
    why = serializers.CharField()


class WorkloadSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    allocations = serializers.SerializerMethodField(
        help_text="one per node: what it holds now, or, ended, what it held last"
    )
    locality = serializers.SerializerMethodField()

    class Meta:
        model = Workload
        fields = [
            "id",
            "cluster",
            "kind",
            "scheduler_id",
            "name",
            "user",
            "account",
            "partition",
            "state",
            "submitted_at",
            "started_at",
            "ended_at",
            "node_count",
            "gpu_count",
            "gpu_models",
            "allocations",
            "locality",
        ]
        read_only_fields = fields
        extra_kwargs = {"gpu_models": {"help_text": "the GPU models it holds"}}

    @extend_schema_field(AllocationNodeSerializer(many=True))
    def get_allocations(self, obj: Workload) -> list[dict[str, Any]]:
        return [
            {
                "node": entry.node,
                "node_id": entry.node_id,
                "server": entry.server_id,
                "gpus": [
                    {
                        "index": a.index,
                        "uuid": a.uuid or None,
                        "gpu": a.gpu_id,
                        "mig_device": a.mig_device_id,
                    }
                    for a in entry.gpus
                ],
            }
            for entry in by_node(shown_allocations(list(obj.allocations.all())))
        ]

    @extend_schema_field(LocalitySerializer)
    def get_locality(self, obj: Workload) -> dict[str, Any]:
        locality = obj.locality if isinstance(obj.locality, dict) else {}
        return {
            "within_node": locality.get("within_node"),
            "switch_hops": locality.get("switch_hops"),
            "verdict": obj.verdict,
            "why": locality.get("why") or "",
        }
