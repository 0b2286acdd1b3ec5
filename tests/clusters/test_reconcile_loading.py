"""Reconciliation loads rows column by column and builds the facts positionally: every column
must land in its own field, converted as Django converts it, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from clusters.models import Cluster, Node
from clusters.parsers.records import GresRecord
from clusters.reconcile import _load_nodes, _load_servers
from clusters.rules.types import ClaimedGpu, NodeFacts, ResourceCount, ServerFacts
from inventory.choices import GpuStatus
from inventory.models import Gpu, GpuClaim, HardwareProfile, MigDevice, Server

pytestmark = pytest.mark.django_db

SEEN = datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)


def server(hostname: str, **fields) -> Server:
    return Server.objects.create(identity=f"hostname:{hostname}", hostname=hostname, **fields)


def gpu(on: Server, index: int, **fields) -> Gpu:
    return Gpu.objects.create(server=on, index=index, uuid=f"GPU-{on.id}-{index}", **fields)


def test_every_server_column_lands_in_its_own_fact():
    profile = HardwareProfile.objects.create(name="dgx", expected_gpu_count=8)
    host = server("kvm-01")
    vm = server(
        "vm-01",
        fqdn="vm-01.lab.example",
        system_uuid="u-1",
        machine_id="m-1",
        addresses=["10.0.0.7", "vm-01.lab"],
        last_seen=SEEN,
        driver_version="550.54.15",
        cuda_version="12.4",
        vendor="NVIDIA",
        product="DGXH100",
        hardware_profile=profile,
        pci_gpu_count=3,
        is_virtual=True,
        physical_host=host,
        nvml_error="NVML_ERROR_UNKNOWN",
    )
    gpu(vm, 0, name="NVIDIA H100 80GB HBM3", mig_mode_current=True, mig_mode_pending=True)
    gpu(vm, 1, name="NVIDIA H100 80GB HBM3", mig_mode_current=False, mig_mode_pending=True)
    gpu(vm, 2, name="NVIDIA A100 80GB PCIe", ecc_errors_uncorrected=2)
    gpu(vm, 3, name="gone", status=GpuStatus.LOST)
    mig = MigDevice.objects.create(
        gpu=Gpu.objects.get(server=vm, index=0),
        uuid="MIG-1",
        gpu_instance_id=1,
        compute_instance_id=0,
        profile="1g.10gb",
    )
    held = gpu(host, 0, serial="S-9")
    GpuClaim.objects.create(server=vm, gpu=held, uuid=held.uuid)
    GpuClaim.objects.create(server=vm, gpu=held, uuid="MIG-x", mig_device=mig)

    facts = _load_servers()[vm.id]

    assert facts == ServerFacts(
        id=vm.id,
        hostname="vm-01",
        fqdn="vm-01.lab.example",
        system_uuid="u-1",
        machine_id="m-1",
        addresses=("10.0.0.7", "vm-01.lab"),
        last_seen=SEEN,
        driver_version="550.54.15",
        cuda_version="12.4",
        vendor="NVIDIA",
        product="DGXH100",
        profile_id=profile.id,
        pci_gpu_count=3,
        is_virtual=True,
        physical_host_id=host.id,
        nvml_error="NVML_ERROR_UNKNOWN",
        gpus=3,
        mig_gpus=1,
        mig_pending=1,
        names=frozenset({"NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe"}),
        mig_profiles=Counter({"1g.10gb": 1}),
        gpu_claims=facts.gpu_claims,
        unhealthy=facts.unhealthy,
    )
    assert sorted(facts.gpu_claims, key=lambda c: c.uuid) == [
        ClaimedGpu(host.id, held.uuid, "S-9", None),
        ClaimedGpu(host.id, "MIG-x", "S-9", mig.id),
    ]
    assert set(facts.unhealthy) == {f"GPU-{vm.id}-2", f"GPU-{vm.id}-3"}
    assert isinstance(facts.is_virtual, bool)
    assert _load_servers([host.id]) == {host.id: _load_servers()[host.id]}


def test_every_node_column_lands_in_its_own_fact():
    bound = server("dgx-01")
    cluster = Cluster.objects.create(name="prod", kind="kubernetes")
    gres = [{"name": "gpu", "type": "h100", "count": 8, "used": 2, "used_indexes": "0-1"}]
    node = Node.objects.create(
        cluster=cluster,
        name="dgx-01",
        kind="kubernetes",
        hostname="dgx-01.lab",
        addresses=["10.0.0.1", "dgx-01"],
        system_uuid="u-1",
        machine_id="m-1",
        state="drained",
        raw_state="IDLE+DRAIN",
        state_flags=["DRAIN"],
        ready=True,
        schedulable=False,
        reason="maintenance",
        gpu_capacity=8,
        gpu_allocatable=7,
        gpu_used=2,
        gres=gres,
        resources={"nvidia.com/gpu.shared": {"capacity": 32, "allocatable": 30}},
        mig_resources={"nvidia.com/mig-1g.10gb": 7},
        gpu_product="NVIDIA-H100-80GB-HBM3",
        gpu_replicas=4,
        mig_strategy="Mixed",
        server=bound,
        binding_method="manual",
    )
    twin = Node.objects.create(cluster=cluster, name="dgx-02", kind="kubernetes", gres=gres)
    Node.objects.create(cluster=cluster, name="gone", kind="kubernetes", gone_at=SEEN)

    loaded = _load_nodes({cluster.id: "prod"})

    assert [n.id for n in loaded] == [node.id, twin.id]
    assert loaded[0] == NodeFacts(
        id=node.id,
        cluster_id=cluster.id,
        cluster="prod",
        kind="kubernetes",
        name="dgx-01",
        state="drained",
        raw_state="IDLE+DRAIN",
        state_flags=("DRAIN",),
        ready=True,
        schedulable=False,
        reason="maintenance",
        gpu_capacity=8,
        gpu_allocatable=7,
        gpu_used=2,
        gres=(GresRecord("gpu", "h100", 8, 2, "0-1", None),),
        mig_resources={"1g.10gb": 7},
        shared_gpus=ResourceCount(32, 30),
        gpu_product="NVIDIA-H100-80GB-HBM3",
        gpu_replicas=4,
        mig_strategy="mixed",
        hostname="dgx-01.lab",
        addresses=("10.0.0.1", "dgx-01"),
        system_uuid="u-1",
        machine_id="m-1",
        server_id=bound.id,
        binding_method="manual",
    )
    assert (loaded[1].ready, loaded[1].gpu_replicas, loaded[1].shared_gpus) == (False, 1, None)
    assert loaded[1].gres is loaded[0].gres  # one decoded value, shared
    assert _load_nodes({cluster.id: "prod"}, server_ids=[bound.id]) == loaded[:1]
