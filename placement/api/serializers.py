"""Placement API shapes: placement, failure domains, the capacity planner.

Query serializers parse the parameters; result serializers read the services' dataclasses and
dicts as they are, so the OpenAPI schema names every field a client relies on.
"""

from __future__ import annotations

from rest_framework import serializers

from clusters.choices import ClusterKind

from ..types import PlacementRequestError, gpu_memory_text

# Placement ------------------------------------------------------------------------------


class PlacementQuerySerializer(serializers.Serializer):
    cluster = serializers.CharField(
        required=False, allow_blank=True, help_text="cluster name; omitted: every cluster"
    )
    gpus = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=1_000_000,
        help_text="GPUs (or MIG devices) in all: a Kubernetes pod's nvidia.com/gpu, Slurm --gpus",
    )
    nodes = serializers.IntegerField(
        required=False, min_value=1, max_value=100_000, help_text="Slurm --nodes"
    )
    gpus_per_node = serializers.IntegerField(
        required=False, min_value=1, max_value=1024, help_text="Slurm --gpus-per-node"
    )
    model = serializers.CharField(
        required=False, allow_blank=True, help_text="GPU model words, e.g. H100 or A100 80GB"
    )
    mig_profile = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="a MIG profile such as 1g.10gb (any spelling: 1G.10GB, mig-1g.10gb), or its "
        "compute slices alone: 1g takes whichever of the fleet's 1g profiles (1g.5gb, 1g.10gb, "
        "1g.20gb...) fits best, one profile per job",
    )
    nvlink_only = serializers.BooleanField(
        default=False, help_text="only GPU sets all connected by NVLink within a node"
    )
    min_gpu_memory = serializers.CharField(
        required=False, allow_blank=True, help_text="per GPU: 40GB, 80GiB or bytes"
    )
    partition = serializers.CharField(required=False, allow_blank=True, help_text="Slurm partition")
    same_numa = serializers.BooleanField(
        default=False, help_text="the GPUs of a node on one NUMA node"
    )
    mix_models = serializers.BooleanField(
        default=False,
        help_text="allow several GPU models in one job; off (the default), a job keeps to one "
        "GPU model and a request only several models hold does not fit (a mixed job runs at "
        "the slowest GPU's pace)",
    )
    scheduler = serializers.ChoiceField(
        choices=ClusterKind.choices,
        required=False,
        allow_blank=True,
        help_text="the scheduler the request is for: kubernetes (a pod request) considers "
        "Kubernetes clusters only, slurm (a job) Slurm clusters only; omitted: every cluster",
    )

    def validate_min_gpu_memory(self, value: str) -> int | None:
        if not value:
            return None
        try:
            return gpu_memory_text(value)
        except PlacementRequestError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def to_service(self) -> dict:
        """Keyword arguments of `placement_find`."""
        data = dict(self.validated_data)
        data["min_gpu_memory_bytes"] = data.pop("min_gpu_memory", None)
        return data


class GpuChoiceSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    uuid = serializers.CharField()
    numa_node = serializers.IntegerField(allow_null=True)
    mig_uuid = serializers.CharField(allow_null=True)
    mig_profile = serializers.CharField(allow_null=True)


class PlacementNodeSerializer(serializers.Serializer):
    node = serializers.CharField()
    node_id = serializers.IntegerField()
    cluster = serializers.CharField()
    kind = serializers.CharField(help_text="kubernetes or slurm")
    server = serializers.IntegerField(allow_null=True, help_text="the bound server's id")
    server_hostname = serializers.CharField(allow_null=True)
    gpu_count = serializers.IntegerField(help_text="GPUs (or MIG devices) taken on this node")
    free_gpus = serializers.IntegerField(help_text="free on this node before the job")
    gpus = GpuChoiceSerializer(many=True, help_text="the GPUs chosen; empty when no agent")
    link_class = serializers.CharField(
        allow_null=True, help_text="worst link among the chosen GPUs (NV18 ... SYS)"
    )
    numa_nodes = serializers.ListField(child=serializers.IntegerField())
    nics = serializers.ListField(
        child=serializers.CharField(), help_text="NICs at PIX distance of the chosen GPUs"
    )
    in_use_known = serializers.BooleanField(
        help_text="false: the scheduler says how many GPUs are used, not which"
    )
    critical_findings = serializers.IntegerField(
        help_text="open critical findings on the node or its server: such nodes rank last"
    )
    gpus_needing_action = serializers.IntegerField(
        help_text="GPUs of its server skipped: an open health finding asks to drain, reset or RMA"
    )


class BlockedNodeSerializer(serializers.Serializer):
    node = serializers.CharField()
    node_id = serializers.IntegerField()
    cluster = serializers.CharField()
    kind = serializers.CharField()
    server = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField(
        help_text="not_ready, not_schedulable, unhealthy_gpu, needs_action, mig_layout, in_use, "
        "too_small, nvlink, numa, memory, model"
    )
    reason_text = serializers.CharField(help_text="the reason in words")
    detail = serializers.CharField()
    gpus_needing_action = serializers.IntegerField(help_text="GPUs of its server needing action")
    filled_by = serializers.ListField(
        child=serializers.CharField(),
        help_text="the running workloads holding its GPUs: `job 5679 (alice, 8 GPUs)`",
    )


class NeedingActionSerializer(serializers.Serializer):
    node = serializers.CharField()
    node_id = serializers.IntegerField()
    cluster = serializers.CharField()
    server = serializers.IntegerField(allow_null=True)
    server_hostname = serializers.CharField(allow_null=True)
    gpus = serializers.IntegerField(help_text="GPUs of the node's server skipped")
    reasons = serializers.ListField(
        child=serializers.CharField(), help_text="GPUs per health finding type, in words"
    )


class AlternativeSerializer(serializers.Serializer):
    description = serializers.CharField()
    cluster = serializers.CharField()
    kind = serializers.CharField()
    total_gpus = serializers.IntegerField()
    node_count = serializers.IntegerField()
    gpus_per_node = serializers.IntegerField()
    nodes = serializers.ListField(child=serializers.CharField())
    params = serializers.DictField(help_text="query parameters that ask this alternative")


class ClusterAnswerSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    kind = serializers.CharField()
    fits = serializers.BooleanField()
    request = serializers.CharField(help_text="the request as this cluster's scheduler reads it")
    total_gpus = serializers.IntegerField()
    node_count = serializers.IntegerField()
    reason = serializers.CharField(allow_null=True)
    models = serializers.ListField(child=serializers.CharField())
    mixes_models = serializers.BooleanField(
        help_text="fits by mixing GPU models (asked with mix_models): the job runs at the "
        "slowest GPU's pace"
    )
    mig_profile = serializers.CharField(
        allow_null=True, help_text="the MIG profile planned here (1g: the profile chosen)"
    )


class MigElsewhereSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    kind = serializers.CharField()
    free = serializers.IntegerField(help_text="free MIG devices of the profile asked")
    profiles = serializers.ListField(
        child=serializers.CharField(), help_text="the profiles among them (1g: several)"
    )
    nodes = serializers.ListField(
        child=serializers.CharField(), help_text="nodes with free devices, the most first (5)"
    )
    more_nodes = serializers.IntegerField(help_text="nodes with free devices beyond those named")
    text = serializers.CharField(help_text="in words: 14 free on Kubernetes cluster prod: ...")


class PlacementFabricSerializer(serializers.Serializer):
    hops = serializers.IntegerField(
        allow_null=True,
        help_text="switches between the farthest two nodes: 1 one leaf, 3 via a spine, 5 via a "
        "core; null when a node's fabric is unknown",
    )
    leaves = serializers.IntegerField(help_text="leaf switches (or rail leaf groups) used")
    spine_groups = serializers.IntegerField()
    nvlink_domains = serializers.IntegerField()
    why = serializers.CharField(help_text="why these nodes, in words")


class PlacementResultSerializer(serializers.Serializer):
    fits = serializers.BooleanField()
    total_gpus = serializers.IntegerField(help_text="GPUs placed: 2 nodes x 8 is 16")
    requested_gpus = serializers.IntegerField()
    cluster = serializers.CharField(allow_null=True)
    kind = serializers.CharField(allow_null=True)
    nodes = PlacementNodeSerializer(many=True, help_text="the nodes the job takes, best first")
    reason = serializers.CharField(allow_null=True, help_text="why it does not fit")
    candidates = PlacementNodeSerializer(
        many=True, help_text="more nodes (any cluster) that could take it or a share of it"
    )
    alternatives = AlternativeSerializer(many=True, help_text="nearest requests that fit now")
    blocked = BlockedNodeSerializer(many=True, help_text="nodes excluded and why (at most 50)")
    blocked_counts = serializers.DictField(child=serializers.IntegerField())
    clusters = ClusterAnswerSerializer(many=True)
    request = serializers.DictField()
    models = serializers.ListField(
        child=serializers.CharField(), help_text="the GPU models of the nodes chosen"
    )
    cost = serializers.CharField(
        allow_null=True, help_text="what the answer costs, such as mixing GPU models"
    )
    scheduler = serializers.CharField(
        allow_null=True, help_text="the scheduler the request was for; null: every cluster"
    )
    scope = serializers.CharField(
        allow_null=True,
        help_text="which clusters were considered, in words, when the request named a scheduler",
    )
    fabric = PlacementFabricSerializer(
        allow_null=True, help_text="multi-node answers: how close the nodes are on the network"
    )
    needing_action = NeedingActionSerializer(
        many=True, help_text="nodes whose GPUs needing action were skipped (at most 50)"
    )
    gpus_needing_action = serializers.IntegerField(
        help_text="GPUs skipped in the clusters asked: open health findings (drain, reset, RMA)"
    )
    health = serializers.CharField(allow_null=True, help_text="the GPUs skipped, in words")
    mig_profile = serializers.CharField(
        allow_null=True,
        help_text="the MIG profile placed: the one asked, or for 1g the profile chosen",
    )
    mig_elsewhere = MigElsewhereSerializer(
        many=True,
        help_text="a MIG request that does not fit: where the profile is free in clusters it "
        "did not consider (another cluster, the other scheduler), the most first",
    )


# Failure domains ------------------------------------------------------------------------


class FailureDomainQuerySerializer(serializers.Serializer):
    server = serializers.IntegerField(required=False, min_value=1, help_text="a server id")
    rack = serializers.CharField(required=False, allow_blank=True)
    switch = serializers.CharField(required=False, allow_blank=True)

    def validate(self, attrs: dict) -> dict:
        given = [k for k in ("server", "rack", "switch") if attrs.get(k)]
        if len(given) != 1:
            raise serializers.ValidationError(
                {"server": ["give exactly one of server, rack or switch"]}
            )
        return attrs


class FailureTargetSerializer(serializers.Serializer):
    kind = serializers.CharField()
    name = serializers.CharField()
    id = serializers.IntegerField(allow_null=True)


class LostServerSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    hostname = serializers.CharField()
    rack = serializers.CharField()
    rack_position = serializers.IntegerField(allow_null=True)
    is_virtual = serializers.BooleanField()
    physical_host = serializers.IntegerField(allow_null=True)
    gpus = serializers.IntegerField()


class LostNodeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    cluster = serializers.CharField()
    kind = serializers.CharField()
    server = serializers.IntegerField(allow_null=True)
    server_hostname = serializers.CharField(allow_null=True)
    gpu_capacity = serializers.IntegerField()
    partitions = serializers.ListField(child=serializers.CharField())
    state = serializers.CharField()


class LostGpuSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    uuid = serializers.CharField()
    index = serializers.IntegerField()
    server = serializers.IntegerField()
    server_hostname = serializers.CharField()
    name = serializers.CharField()
    mig_enabled = serializers.BooleanField()
    needs_action = serializers.BooleanField(
        help_text="an open health finding asks to drain, reset or RMA it: already out of service"
    )


class LostMigDeviceSerializer(serializers.Serializer):
    uuid = serializers.CharField()
    gpu = serializers.IntegerField()
    server = serializers.IntegerField()
    profile = serializers.CharField()


class DegradedServerSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    hostname = serializers.CharField()
    other_switches = serializers.ListField(
        child=serializers.CharField(), help_text="switch=NAME: the switches it keeps a path through"
    )
    loss = serializers.CharField(
        required=False,
        help_text="rail (a fabric leaf takes NICs of it), uplink (a spine or core takes part of "
        "its way up beyond its leaf) or nic (a switch by name takes NICs of it)",
    )
    gbps_lost = serializers.FloatField(
        required=False, help_text="Gb/s lost: its NICs on the switch; uplink: beyond its leaf"
    )
    gbps_before = serializers.FloatField(
        required=False, help_text="Gb/s of its fabric NICs before (switch=NAME: of its NICs)"
    )
    share_lost = serializers.FloatField(
        required=False, help_text="0..1: gbps_lost of gbps_before, its network bandwidth lost"
    )
    rails_lost = serializers.ListField(
        child=serializers.IntegerField(), required=False, help_text="the rails of its NICs lost"
    )
    nics_lost = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="its NICs on the switch"
    )
    gpus = serializers.IntegerField(required=False, help_text="its GPUs (not lost)")
    gpus_nic_lost = serializers.ListField(
        child=serializers.IntegerField(),
        required=False,
        help_text="indexes of its GPUs whose nearest fabric NIC (PIX on a rail-optimised "
        "server) is on the switch: their GPUDirect RDMA path is gone",
    )
    nodes = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="its scheduler nodes, still up"
    )


class DegradedNodeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    cluster = serializers.CharField()
    kind = serializers.CharField()
    server = serializers.IntegerField(allow_null=True)
    server_hostname = serializers.CharField()
    gpu_capacity = serializers.IntegerField()
    gbps_lost = serializers.FloatField(allow_null=True, help_text="its server's Gb/s lost")
    share_lost = serializers.FloatField(allow_null=True, help_text="its server's share lost")
    rails_lost = serializers.ListField(child=serializers.IntegerField())


class DegradedGpuSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    uuid = serializers.CharField()
    index = serializers.IntegerField()
    server = serializers.IntegerField()
    server_hostname = serializers.CharField()
    nics = serializers.ListField(
        child=serializers.CharField(), help_text="its nearest NICs, every one on the switch"
    )


class FabricLossSerializer(serializers.Serializer):
    fabric = serializers.CharField()
    switch = serializers.CharField()
    switch_id = serializers.IntegerField()
    tier = serializers.IntegerField(allow_null=True, help_text="1 leaf, 2 spine, 3 core")
    role = serializers.CharField(help_text="leaf, spine, core, tier N or switch (unknown)")
    rail = serializers.IntegerField(allow_null=True, help_text="a rail-optimised leaf's rail")
    gbps_lost = serializers.FloatField(
        help_text="a leaf: its cables to servers; a spine: its cables to the tier below"
    )
    bisection_share_lost = serializers.FloatField(
        allow_null=True, help_text="a spine: 0..1 of its tier's bandwidth downwards"
    )
    bandwidth_between = serializers.CharField(
        allow_null=True, help_text="a spine: the bandwidth that share is of (leaf-to-spine)"
    )
    servers_cut = serializers.IntegerField(help_text="servers whose every fabric cable is on it")
    servers_degraded = serializers.IntegerField(help_text="servers that lose bandwidth, still up")
    gpus_degraded = serializers.IntegerField(help_text="the GPUs of those servers")
    gpus_nic_lost = serializers.IntegerField(help_text="GPUs whose nearest NIC is on it")
    server_share_lost_min = serializers.FloatField(allow_null=True)
    server_share_lost_max = serializers.FloatField(
        allow_null=True, help_text="0..1: the most a degraded server loses of its bandwidth"
    )
    job_gpus_per_node = serializers.IntegerField(
        help_text="the multi-node job judged: this many GPUs on each node (8)"
    )
    job_slots_degraded = serializers.IntegerField(
        help_text="slots of such a job on the degraded servers (GPUs // 8 each): each one a "
        "job would run slower on"
    )
    isolated_switches = serializers.ListField(
        child=serializers.IntegerField(), help_text="switches below left without an uplink"
    )
    message = serializers.CharField(help_text="the loss in words, as the ranking says it")
    per_job = serializers.CharField(help_text="what a multi-node job loses per node, in words")


class FailureWorkloadSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="the workload's id (`workloads/{id}/`)")
    scheduler_id = serializers.CharField()
    user = serializers.CharField()
    kind = serializers.CharField(help_text="`slurm_job` or `pods`")
    cluster = serializers.CharField()
    nodes = serializers.IntegerField(help_text="nodes it runs on, in the domain or not")
    gpus = serializers.IntegerField(
        help_text="GPUs it holds in the domain: on the servers lost when it stops, on the "
        "degraded servers when it loses bandwidth"
    )
    stops = serializers.BooleanField(help_text="a GPU of it is on a server the failure takes")
    loses_bandwidth = serializers.BooleanField(
        help_text="it spans several nodes and one is on a server that loses bandwidth"
    )


class ClusterCapacitySerializer(serializers.Serializer):
    cluster = serializers.CharField()
    kind = serializers.CharField()
    gpu_capacity = serializers.IntegerField()
    gpu_capacity_lost = serializers.IntegerField()
    share_lost = serializers.FloatField(help_text="0..1 of the cluster's GPU capacity")
    nodes_lost = serializers.IntegerField()
    largest_node_free_before = serializers.IntegerField()
    largest_node_free_after = serializers.IntegerField(
        help_text="most free GPUs on one node afterwards: the largest pod that still fits"
    )
    free_gpus_before = serializers.IntegerField()
    free_gpus_after = serializers.IntegerField(
        help_text="free GPUs in all afterwards: the largest multi-node job"
    )
    gpus_needing_action = serializers.IntegerField(
        help_text="GPUs already lost to health (open findings: drain, reset, RMA), not free before"
    )


class PartitionCapacitySerializer(serializers.Serializer):
    cluster = serializers.CharField()
    partition = serializers.CharField()
    gpu_capacity = serializers.IntegerField()
    gpu_capacity_lost = serializers.IntegerField()
    share_lost = serializers.FloatField()


class FailureDomainSerializer(serializers.Serializer):
    target = FailureTargetSerializer()
    servers = serializers.IntegerField(help_text="servers lost, VMs of a lost host included")
    nodes = serializers.IntegerField(help_text="scheduler nodes lost, every cluster")
    gpus = serializers.IntegerField()
    gpus_needing_action = serializers.IntegerField(
        help_text="of the GPUs lost, those already out of service for health"
    )
    mig_devices = serializers.IntegerField()
    server_list = LostServerSerializer(many=True)
    node_list = LostNodeSerializer(many=True)
    gpu_list = LostGpuSerializer(many=True)
    mig_device_list = LostMigDeviceSerializer(many=True)
    degraded_servers = DegradedServerSerializer(
        many=True,
        help_text="switch only: servers that stay up and lose bandwidth (a rail, a NIC, part of "
        "their way up), by hostname",
    )
    degraded_nodes = DegradedNodeSerializer(
        many=True, help_text="switch only: the scheduler nodes of the degraded servers"
    )
    degraded_gpus = DegradedGpuSerializer(
        many=True, help_text="switch only: GPUs of degraded servers whose nearest NIC is on it"
    )
    clusters = ClusterCapacitySerializer(many=True)
    partitions = PartitionCapacitySerializer(many=True)
    fabric = FabricLossSerializer(
        allow_null=True, help_text="a fabric switch (switch=ID): bandwidth lost, in words too"
    )
    workloads = FailureWorkloadSerializer(
        many=True,
        help_text="the running workloads the failure stops or slows, those that stop first",
    )


class RankingQuerySerializer(serializers.Serializer):
    by = serializers.ChoiceField(choices=["rack", "server", "switch"], default="rack")
    rank = serializers.ChoiceField(
        choices=["gpus", "workloads", "users"],
        default="gpus",
        help_text="order by the GPUs taken down, or the running workloads or users hit",
    )
    limit = serializers.IntegerField(default=50, min_value=1, max_value=1000)


class RankingItemSerializer(serializers.Serializer):
    name = serializers.CharField()
    id = serializers.IntegerField(
        allow_null=True, help_text="the server's id (by=server), the switch's (by=switch)"
    )
    servers = serializers.IntegerField(help_text="servers it takes down")
    nodes = serializers.IntegerField()
    gpus = serializers.IntegerField(help_text="GPUs it takes down")
    mig_devices = serializers.IntegerField()
    share_of_fleet_gpus = serializers.FloatField()
    workloads = serializers.IntegerField(
        help_text="running workloads it stops (a switch: or slows, spread over nodes)"
    )
    users = serializers.IntegerField(help_text="distinct users of those workloads")
    fabric = serializers.CharField(required=False, help_text="by=switch")
    tier = serializers.IntegerField(required=False, allow_null=True, help_text="by=switch")
    gbps_lost = serializers.FloatField(
        required=False, help_text="by=switch: network Gb/s lost with it (servers stay up)"
    )
    servers_degraded = serializers.IntegerField(
        required=False, help_text="by=switch: servers that lose a NIC (a rail) and stay up"
    )
    gpus_degraded = serializers.IntegerField(
        required=False, help_text="by=switch: the GPUs of those servers (still up)"
    )
    rails_lost = serializers.ListField(
        child=serializers.IntegerField(), required=False, help_text="by=switch: a leaf's rails"
    )
    bisection_share_lost = serializers.FloatField(
        required=False, allow_null=True, help_text="by=switch: a spine's share of its tier"
    )
    isolated_switches = serializers.IntegerField(
        required=False, help_text="by=switch: switches below left without an uplink"
    )
    message = serializers.CharField(required=False, help_text="by=switch: the loss in words")


class RankingSerializer(serializers.Serializer):
    by = serializers.CharField()
    rank = serializers.CharField(help_text="gpus, workloads or users")
    fleet_gpus = serializers.IntegerField()
    count = serializers.IntegerField()
    unracked_servers = serializers.IntegerField()
    items = RankingItemSerializer(many=True)


# Capacity planner -----------------------------------------------------------------------


class CapacityQuerySerializer(serializers.Serializer):
    gpus = serializers.IntegerField(min_value=1, max_value=10_000_000)
    per_server = serializers.CharField(
        default="8,4,1", help_text="GPUs per server to compare, comma-separated"
    )
    nvlink = serializers.BooleanField(
        default=True, help_text="GPUs within a server are NVLink-connected (else PCIe)"
    )
    model = serializers.CharField(required=False, allow_blank=True)

    def validate_per_server(self, value: str) -> list[int]:
        try:
            sizes = [int(v) for v in value.split(",") if v.strip()]
        except ValueError:
            raise serializers.ValidationError("whole numbers, comma-separated: 8,4,1") from None
        if not sizes or len(sizes) > 16 or any(s < 1 or s > 1024 for s in sizes):
            raise serializers.ValidationError("1 to 16 sizes, each between 1 and 1024")
        return sizes


class LayoutSerializer(serializers.Serializer):
    gpus_per_server = serializers.IntegerField()
    servers = serializers.IntegerField()
    total_gpus = serializers.IntegerField()
    spare_gpus = serializers.IntegerField(help_text="GPUs beyond the request (whole servers)")
    nodes = serializers.IntegerField()
    largest_job_one_node = serializers.IntegerField()
    gpus_lost_per_server_failure = serializers.IntegerField()
    share_lost_per_server_failure = serializers.FloatField()
    largest_job_after_server_failure = serializers.IntegerField()
    gpu_pairs = serializers.IntegerField()
    pairs_within_server = serializers.IntegerField()
    pairs_over_network = serializers.IntegerField()
    share_within_server = serializers.FloatField()
    share_over_network = serializers.FloatField()
    share_nvlink = serializers.FloatField()
    within_server_link = serializers.CharField(allow_null=True)
    gpus_needing_action = serializers.IntegerField(
        help_text="expected GPUs out of service for health, at the fleet's share now"
    )
    servers_whole = serializers.IntegerField(
        help_text="expected servers with no GPU needing action (they hold a full-node job)"
    )


class FragmentationSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    kind = serializers.CharField()
    nodes = serializers.IntegerField(help_text="schedulable nodes with GPUs")
    free_gpus = serializers.IntegerField()
    stranded_gpus = serializers.IntegerField(help_text="free GPUs on partly used nodes")
    node_size = serializers.IntegerField(help_text="the most common GPU count of its nodes")
    whole_nodes_free = serializers.IntegerField(
        help_text="nodes with node_size GPUs free: the largest whole-node job, in nodes"
    )
    largest_one_node = serializers.IntegerField(help_text="the most GPUs free on one node")
    histogram = serializers.DictField(
        child=serializers.IntegerField(), help_text="free GPUs on a node -> nodes"
    )
    text = serializers.CharField(help_text="the same in words")


class CapacitySerializer(serializers.Serializer):
    gpus = serializers.IntegerField()
    model = serializers.CharField(allow_null=True)
    action_share = serializers.FloatField(
        help_text="0..1: the fleet's GPUs needing action now (open health findings)"
    )
    layouts = LayoutSerializer(many=True)
    fragmentation = FragmentationSerializer(
        many=True, help_text="per cluster: free GPUs by the largest job each could still take"
    )
