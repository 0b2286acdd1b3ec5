"""The model columns the rules' facts are made of (`clusters.rules.types`): what reconciliation
loads into `ServerFacts` and `NodeFacts`, and what its digests of judged inputs cover
(`clusters.judged`), so a column a rule starts to read is loaded and watched at once."""

from __future__ import annotations

SERVER_COLUMNS = (
    "id",
    "hostname",
    "fqdn",
    "system_uuid",
    "machine_id",
    "addresses",
    "last_seen",
    "driver_version",
    "cuda_version",
    "vendor",
    "product",
    "hardware_profile_id",
    "pci_gpu_count",
    "is_virtual",
    "physical_host_id",
    "nvml_error",
    "rack",
    "rack_position",
    "declared_kubernetes_node",
    "declared_slurm_node",
)
"""The Server columns `ServerFacts` takes, in its field order (`hardware_profile_id` is its
`profile_id`)."""

NODE_COLUMNS = (
    "id",
    "cluster_id",
    "kind",
    "name",
    "state",
    "raw_state",
    "state_flags",
    "ready",
    "schedulable",
    "reason",
    "gpu_capacity",
    "gpu_allocatable",
    "gpu_used",
    "gres",
    "mig_resources",
    "resources",
    "gpu_product",
    "gpu_replicas",
    "mig_strategy",
    "hostname",
    "addresses",
    "system_uuid",
    "machine_id",
    "server_id",
    "binding_method",
)
"""The Node columns `NodeFacts` is made of, in its field order (`resources` becomes
`shared_gpus`)."""

IDENTITY_COLUMNS = (
    "hostname",
    "fqdn",
    "system_uuid",
    "machine_id",
    "addresses",
    "declared_kubernetes_node",
    "declared_slurm_node",
)
"""The Server columns binding reads (`clusters.reconcile._index`, `_declared`), besides the id:
a declaration that changes may move any node (and `node_declared_twice` compares them across
the fleet), so it is identity, and a change judges everything."""
