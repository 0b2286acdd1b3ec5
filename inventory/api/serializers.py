"""Inventory API representations. Counts and state come annotated from the selectors."""

from __future__ import annotations

from rest_framework import serializers

from core.api.errors import ErrorsField

from ..models import ChangeEvent, Disk, Gpu, Guest, Link, MigDevice, Nic, Server


class MigDeviceSerializer(serializers.ModelSerializer):
    class Meta:
        model = MigDevice
        fields = [
            "id",
            "uuid",
            "uuid_synthetic",
            "gpu",
            "profile",
            "gpu_instance_id",
            "compute_instance_id",
            "memory_bytes",
            "sm_count",
            "placement_start",
            "placement_size",
        ]


class MigDeviceListSerializer(MigDeviceSerializer):
    gpu_uuid = serializers.CharField(source="gpu.uuid", read_only=True)
    server = serializers.IntegerField(source="gpu.server_id", read_only=True)
    server_hostname = serializers.CharField(source="gpu.server.hostname", read_only=True)

    class Meta(MigDeviceSerializer.Meta):
        fields = [*MigDeviceSerializer.Meta.fields, "gpu_uuid", "server", "server_hostname"]


GPU_FIELDS = [
    "id",
    "uuid",
    "uuid_synthetic",
    "server",
    "index",
    "name",
    "serial",
    "pci_bus_id",
    "memory_total_bytes",
    "mig_enabled",
    "mig_mode_current",
    "mig_mode_pending",
    "status",
    "error",
    "board_part_number",
    "architecture",
    "compute_capability",
    "power_limit_w",
    "vbios_version",
    "numa_node",
    "cpu_affinity",
    "persistence_mode",
    "ecc_mode_current",
    "ecc_errors_corrected",
    "ecc_errors_uncorrected",
    "retired_pages",
    "retired_pages_pending",
    "remapped_rows_correctable",
    "remapped_rows_uncorrectable",
    "remapped_rows_pending",
    "remapped_rows_failure",
    "nvlinks",
    "fabric_cluster_uuid",
    "fabric_clique_id",
    "fabric_state",
    "fabric_status",
    "first_seen",
    "last_seen",
]


class GpuSerializer(serializers.ModelSerializer):
    mig_enabled = serializers.BooleanField(read_only=True)

    class Meta:
        model = Gpu
        fields = GPU_FIELDS


class GpuListSerializer(GpuSerializer):
    server_hostname = serializers.CharField(source="server.hostname", read_only=True)
    mig_device_count = serializers.IntegerField(read_only=True)

    class Meta(GpuSerializer.Meta):
        fields = [*GPU_FIELDS, "server_hostname", "mig_device_count"]


class GpuWithMigSerializer(GpuSerializer):
    mig_devices = MigDeviceSerializer(many=True, read_only=True)

    class Meta(GpuSerializer.Meta):
        fields = [*GPU_FIELDS, "mig_devices"]


class NicSerializer(serializers.ModelSerializer):
    class Meta:
        model = Nic
        fields = [
            "id",
            "name",
            "netdev",
            "kind",
            "mac",
            "pci_bus_id",
            "numa_node",
            "speed_mbps",
            "state",
            "addresses",
            "switch",
            "switch_port",
            "node_guid",
            "port_number",
            "port_guid",
            "port_guids",
            "lid",
            "rate",
            "phys_state",
            "link_layer",
            "lldp_neighbors",
        ]


DISK_FIELDS = [
    "id",
    "name",
    "model",
    "serial",
    "size_bytes",
    "rotational",
    "transport",
    "pci_bus_id",
    "pcie_link_speed",
    "pcie_link_width",
    "numa_node",
]


class DiskSerializer(serializers.ModelSerializer):
    class Meta:
        model = Disk
        fields = DISK_FIELDS


class DiskListSerializer(DiskSerializer):
    server_hostname = serializers.CharField(source="server.hostname", read_only=True)

    class Meta(DiskSerializer.Meta):
        fields = [*DISK_FIELDS, "server", "server_hostname"]


class LinkSerializer(serializers.ModelSerializer):
    a = serializers.SerializerMethodField()
    b = serializers.SerializerMethodField()

    class Meta:
        model = Link
        fields = [
            "id",
            "a",
            "b",
            "gpu_a",
            "gpu_b",
            "nic",
            "nic_a",
            "nic_b",
            "link_class",
            "nvlink_count",
        ]

    # Which ends a row has is the row's check constraint (see Link); the asserts say it to mypy.
    def get_a(self, link: Link) -> str:
        """GPU<index>, or a NIC pair's first NIC."""
        if link.gpu_a_id:
            assert link.gpu_a is not None
            return f"GPU{link.gpu_a.index}"
        assert link.nic_a is not None
        return link.nic_a.name

    def get_b(self, link: Link) -> str:
        if link.gpu_b_id:
            assert link.gpu_b is not None
            return f"GPU{link.gpu_b.index}"
        if link.nic_id:
            assert link.nic is not None
            return link.nic.name
        assert link.nic_b is not None
        return link.nic_b.name


class ChangeEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = ChangeEvent
        fields = ["id", "kind", "summary", "gpu", "before", "after", "created_at"]


class GuestSerializer(serializers.ModelSerializer):
    class Meta:
        model = Guest
        fields = ["uuid", "name", "state"]


SERVER_FIELDS = [
    "id",
    "hostname",
    "system_uuid",
    "state",
    "gpu_count",
    "mig_device_count",
    "last_seen",
    "machine_id",
    "fqdn",
    "lost_gpu_count",
    "mig_enabled",
    "vendor",
    "product",
    "serial",
    "driver_version",
    "cuda_version",
    "is_virtual",
    "hypervisor",
    "physical_host",
    "rack",
    "rack_position",
    "pci_gpu_count",
    "first_seen",
]


class ServerSerializer(serializers.ModelSerializer):
    state = serializers.CharField(source="state_value", read_only=True)
    gpu_count = serializers.IntegerField(read_only=True)
    lost_gpu_count = serializers.IntegerField(read_only=True)
    mig_device_count = serializers.IntegerField(read_only=True)
    mig_enabled = serializers.BooleanField(read_only=True)

    class Meta:
        model = Server
        fields = SERVER_FIELDS
        read_only_fields = [
            f for f in SERVER_FIELDS if f not in ("rack", "rack_position", "physical_host")
        ]

    def update(self, instance: Server, validated_data: dict) -> Server:
        if "physical_host" in validated_data:
            validated_data["physical_host_manual"] = validated_data["physical_host"] is not None
        return super().update(instance, validated_data)


class ServerDetailSerializer(ServerSerializer):
    gpus = GpuWithMigSerializer(many=True, read_only=True)
    nics = NicSerializer(many=True, read_only=True)
    disks = DiskSerializer(many=True, read_only=True)
    links = LinkSerializer(many=True, read_only=True)
    guests = GuestSerializer(many=True, read_only=True)
    virtual_machines: serializers.PrimaryKeyRelatedField[Server] = (
        serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    )
    recent_changes = ChangeEventSerializer(many=True, read_only=True)
    physical_host_manual = serializers.BooleanField(read_only=True)

    class Meta(ServerSerializer.Meta):
        fields = [
            *SERVER_FIELDS,
            "cpu_model",
            "cpu_sockets",
            "cpu_cores",
            "cpu_threads",
            "memory_total_bytes",
            "numa_nodes",
            "os_name",
            "kernel",
            "nvml_version",
            "nvml_error",
            "agent_version",
            "agent_source",
            "nvswitch_count",
            "addresses",
            "pci_gpus",
            "warnings",
            "last_report_partial",
            "last_report_partial_reason",
            "physical_host_manual",
            "gpus",
            "nics",
            "disks",
            "links",
            "guests",
            "virtual_machines",
            "recent_changes",
        ]


class ReportAcceptedSerializer(serializers.Serializer):
    id = serializers.IntegerField(
        allow_null=True, help_text="the stored report (the last applied one when unchanged)"
    )
    status = serializers.ChoiceField(
        choices=["pending", "unchanged", "applied"],
        help_text="applied: the same facts with new GPU events, stored with nothing to apply",
    )
    server = serializers.IntegerField(allow_null=True)


class ReportRejectedSerializer(serializers.Serializer):
    detail = serializers.CharField()
    # The metaclass moves declared fields off the class, so `Serializer.errors` (a property
    # in the stubs) is not overridden at run time.
    errors = ErrorsField()  # type: ignore[assignment]
