"""Scheduler-layer API representations. Secrets are write-only, never read back."""

from __future__ import annotations

from django.urls import reverse
from rest_framework import serializers

from inventory.models import Server

from ..choices import SnapshotStatus
from ..models import Cluster, ClusterSnapshot, Node
from ..services import cluster_name_valid

SECRET_FIELDS = ("slurmrestd_token",)
MAX_SYNC_INTERVAL_S = 7 * 24 * 3600


class ClusterSerializer(serializers.ModelSerializer):
    node_count = serializers.IntegerField(read_only=True)
    bound_node_count = serializers.IntegerField(read_only=True)
    gpu_capacity = serializers.IntegerField(read_only=True)
    gpu_allocatable = serializers.IntegerField(read_only=True)
    slurmrestd_token = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        style={"input_type": "password"},
        help_text="JWT from `scontrol token`; stored, never returned",
    )
    has_token = serializers.SerializerMethodField()

    class Meta:
        model = Cluster
        fields = [
            "id",
            "name",
            "kind",
            "source",
            "kubeconfig_path",
            "kube_context",
            "slurmrestd_url",
            "slurmrestd_user",
            "slurmrestd_token",
            "has_token",
            "slurmrestd_api_version",
            "sync_interval_s",
            "last_sync_at",
            "last_success_at",
            "last_error",
            "last_snapshot_format",
            "source_version",
            "node_count",
            "bound_node_count",
            "gpu_capacity",
            "gpu_allocatable",
        ]
        read_only_fields = [
            "last_sync_at",
            "last_success_at",
            "last_error",
            "last_snapshot_format",
            "source_version",
        ]

    def get_has_token(self, cluster: Cluster) -> bool:
        return bool(cluster.slurmrestd_token)

    def validate_name(self, value: str) -> str:
        if not cluster_name_valid(value):
            raise serializers.ValidationError("lower-case letters, digits, '-' and '_'")
        return value

    def validate_sync_interval_s(self, value: int) -> int:
        if not 30 <= value <= MAX_SYNC_INTERVAL_S:
            raise serializers.ValidationError(f"between 30 and {MAX_SYNC_INTERVAL_S} seconds")
        return value


class NodeSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    server_hostname = serializers.CharField(
        source="server.hostname", read_only=True, default=None, allow_null=True
    )
    agent_gpu_count = serializers.IntegerField(read_only=True)
    open_findings = serializers.IntegerField(read_only=True)
    gpu_free = serializers.IntegerField(read_only=True, allow_null=True)

    class Meta:
        model = Node
        fields = [
            "id",
            "name",
            "cluster",
            "kind",
            "server",
            "server_hostname",
            "binding_method",
            "gpu_capacity",
            "gpu_allocatable",
            "gpu_used",
            "gpu_free",
            "agent_gpu_count",
            "state",
            "state_flags",
            "raw_state",
            "ready",
            "schedulable",
            "reason",
            "hostname",
            "addresses",
            "system_uuid",
            "machine_id",
            "partitions",
            "cpus",
            "cpus_effective",
            "memory_bytes",
            "gres",
            "resources",
            "mig_resources",
            "mig_used",
            "gpu_product",
            "gpu_replicas",
            "sharing_strategy",
            "mig_strategy",
            "mig_config",
            "taints",
            "versions",
            "open_findings",
            "first_seen",
            "last_seen",
            "gone_at",
        ]


class NodeBindingSerializer(serializers.Serializer):
    server = serializers.PrimaryKeyRelatedField(
        queryset=Server.objects.all(),
        allow_null=True,
        help_text="the server this node runs on; null returns the node to automatic binding",
    )


class DetailSerializer(serializers.Serializer):
    detail = serializers.CharField()


class SnapshotResultSerializer(serializers.Serializer):
    """The answer to a posted snapshot. Counts are null until a worker has applied it; for a
    held snapshot, `gone` is how many live nodes it would have marked gone."""

    id = serializers.IntegerField(allow_null=True)
    url = serializers.SerializerMethodField()
    status = serializers.ChoiceField(choices=SnapshotStatus.choices)
    message = serializers.CharField(allow_blank=True)
    cluster = serializers.CharField()
    kind = serializers.CharField(allow_blank=True)
    format = serializers.CharField(allow_blank=True)
    nodes = serializers.IntegerField(allow_null=True)
    added = serializers.IntegerField(allow_null=True)
    gone = serializers.IntegerField(allow_null=True)
    pods = serializers.IntegerField(allow_null=True)

    def get_url(self, result) -> str | None:
        if result.id is None:
            return None
        path = reverse("api:cluster-snapshot-detail", args=[result.cluster, result.id])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path


class SnapshotSerializer(serializers.ModelSerializer):
    """A stored snapshot's state: what the status URL answers."""

    cluster = serializers.CharField(source="cluster_name")

    class Meta:
        model = ClusterSnapshot
        fields = [
            "id",
            "cluster",
            "status",
            "message",
            "errors",
            "source",
            "size_bytes",
            "confirm_shrink",
            "received_at",
            "applied_at",
            "kind",
            "format",
            "nodes",
            "added",
            "gone",
            "pods",
        ]
