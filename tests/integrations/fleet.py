"""A fleet straight into the tables with bulk_create: fast enough for 500 servers per test."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from clusters.models import Cluster, Node
from findings.models import Finding
from inventory.models import Gpu, MigDevice, Report, Server


def bulk_fleet(n: int, *, prefix: str = "s", gpus: int = 2) -> list[Server]:
    """`n` servers of varied age, `gpus` GPUs each (every 7th lost, every 5th with a MIG
    device), a Kubernetes node per server (every 3rd unbound), a finding per 4th server
    and a few stored reports."""
    now = timezone.now()
    servers = Server.objects.bulk_create(
        Server(
            identity=f"hostname:{prefix}{i}",
            hostname=f"{prefix}{i}",
            last_seen=None if i % 11 == 10 else now - timedelta(seconds=37 * i),
        )
        for i in range(n)
    )
    gpu_rows = Gpu.objects.bulk_create(
        Gpu(
            server=server,
            index=g,
            uuid=f"GPU-{prefix}-{i}-{g}",
            name="NVIDIA H100 80GB HBM3" if i % 2 else "NVIDIA A100-SXM4-80GB",
            status="lost" if (i + g) % 7 == 6 else "ok",
            ecc_errors_uncorrected=3 if (i + g) % 9 == 8 else 0,
        )
        for i, server in enumerate(servers)
        for g in range(gpus)
    )
    MigDevice.objects.bulk_create(
        MigDevice(
            gpu=gpu,
            uuid=f"MIG-{gpu.uuid}",
            gpu_instance_id=1,
            compute_instance_id=0,
            profile="1g.10gb" if k % 2 else "3g.40gb",
        )
        for k, gpu in enumerate(gpu_rows)
        if k % 5 == 0
    )
    cluster, _ = Cluster.objects.get_or_create(name=f"{prefix}-k8s", kind="kubernetes")
    nodes = Node.objects.bulk_create(
        Node(
            cluster=cluster,
            name=server.hostname,
            kind="kubernetes",
            server=None if i % 3 == 2 else server,
            gpu_capacity=gpus,
        )
        for i, server in enumerate(servers)
    )
    Finding.objects.bulk_create(
        Finding(
            type="stale_agent" if i % 8 else "unhealthy_gpu",
            severity="critical" if i % 8 == 0 else "warning",
            subject=f"server:{server.hostname}",
            message=f"{server.hostname}: something to look at",
            server=server,
            node=nodes[i],
            resolved_at=now if i % 12 == 0 and i % 8 else None,
        )
        for i, server in enumerate(servers)
        if i % 4 == 0
    )
    Report.objects.bulk_create(
        Report(
            identity=f"hostname:{server.hostname}",
            server=server,
            payload={},
            content_hash="x",
            received_at=now - timedelta(seconds=5),
            applied_at=None if i % 6 == 0 else now - timedelta(seconds=4),
            status="pending" if i % 6 == 0 else "applied",
        )
        for i, server in enumerate(servers)
    )
    return servers
