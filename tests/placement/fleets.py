"""Hand-built fleets for placement and failure-domain tests: reports, snapshots, reconcile
through the database, or the planner's plain objects in memory (`node`, `nvlink_fleet`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Node
from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from fabric.services import fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from inventory.models import Server
from placement.facts import Fleet, FleetGpu, FleetNode, share_servers
from placement.models import LeafPlacement
from placement.tasks import refresh_placement_summaries
from tests.nodes import k8s_node, k8s_node_list, scontrol_node, scontrol_text
from tests.reports import apply_reports, make_report


def pcie_report(hostname: str, switches: list[list[int]], *, gpus: int = 8) -> dict[str, Any]:
    """An 8-GPU PCIe server: PIX inside each switch group, NODE within a NUMA node (GPUs
    0-3 and 4-7), SYS across the sockets."""
    report = make_report(hostname, gpus=gpus, model="NVIDIA L40S")
    group = {i: n for n, members in enumerate(switches) for i in members}
    half = gpus // 2

    def link_class(a: int, b: int) -> str:
        if a in group and group.get(a) == group.get(b):
            return "PIX"
        return "NODE" if (a < half) == (b < half) else "SYS"

    gpu_links = [
        {"a": f"gpu:{a}", "b": f"gpu:{b}", "link_class": link_class(a, b)}
        for a in range(gpus)
        for b in range(a + 1, gpus)
    ]
    nic_links = [link for link in report["links"] if link["b"].startswith("nic:")]
    report["links"] = gpu_links + nic_links
    return report


def slurm_fleet(
    names: list[str], *, cluster: str = "hpc", reports: list[dict] | None = None, **node: Any
) -> dict:
    """Servers with agents and a Slurm cluster whose nodes bind to them by hostname."""
    servers = apply_reports(*(reports or [make_report(n) for n in names]))
    snapshot_ingest(
        cluster_name=cluster, raw=scontrol_text(*(scontrol_node(n, **node) for n in names))
    )
    reconcile_all()
    return servers


def k8s_fleet(
    reports: list[dict], *, cluster: str = "prod", nodes: list[dict] | None = None
) -> dict:
    """Servers with agents and a Kubernetes cluster whose nodes bind by system UUID."""
    servers = apply_reports(*reports)
    items = nodes or [
        k8s_node(r["host"]["hostname"], system_uuid=r["host"]["system_uuid"], gpus=len(r["gpus"]))
        for r in reports
    ]
    snapshot_ingest(cluster_name=cluster, raw=k8s_node_list(*items))
    reconcile_all()
    return servers


def fresh_fabric_fleet(servers: int, prefix: str) -> list[str]:
    """A fleet in place of any before it: `servers` Slurm nodes (`{prefix}001`, ...) with
    agents, on a synthetic fat tree of 4 servers a leaf and 2 rails named `prefix`, every
    placement summary built. Returns the hostnames."""
    LeafPlacement.objects.all().delete()
    Node.objects.all().delete()
    Server.objects.all().delete()
    names = [f"{prefix}{i:03d}" for i in range(1, servers + 1)]
    slurm_fleet(names, reports=[make_report(h) for h in names])
    built = synthetic_fabric(
        servers=servers, rails=2, servers_per_leaf=4, host_format=f"{prefix}{{:03d}}"
    )
    fabric_snapshot_ingest(fabric_name=prefix, raw=built.text)
    refresh_placement_summaries()
    return names


def pods(*placed: tuple[str, int], mig: str | None = None) -> str:
    """`kubectl get pods -A -o json` with running pods (node name, GPUs) each."""
    import json

    resource = f"nvidia.com/mig-{mig}" if mig else "nvidia.com/gpu"
    items = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"job-{i}", "namespace": "ml"},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "main", "resources": {"limits": {resource: str(n)}}}],
            },
            "status": {"phase": "Running"},
        }
        for i, (node, n) in enumerate(placed)
    ]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}})


def fatal_xid(hostname: str, index: int) -> None:
    """An open Fatal Xid finding on the server's GPU of that index: it needs action."""
    from findings.choices import FindingType
    from findings.models import Finding
    from inventory.models import Gpu
    from tests.reports import gpu_uuid

    gpu = Gpu.objects.get(uuid=gpu_uuid(hostname, index))
    Finding.objects.create(
        type=FindingType.GPU_FATAL_XID,
        severity="critical",
        subject=f"gpu_fatal_xid:{gpu.server_id}:x",
        message=f"{hostname}: Xid 79",
        server_id=gpu.server_id,
        gpu=gpu,
    )


def placement_answers(requests: list[dict[str, Any]]) -> dict[str, Any]:
    """What the API answers for each placement request and each server's failure domain,
    and every node's usable counts (each twin by name): for tests that hold two ways of
    reading the fleet to one answer."""
    import json

    from inventory.models import Server
    from placement.api.serializers import FailureDomainSerializer, PlacementResultSerializer
    from placement.failure_domains import failure_domain
    from placement.selectors import fleet_counts
    from placement.service import placement_find

    found: dict[str, Any] = {}
    for request in requests:
        found[json.dumps(request)] = PlacementResultSerializer(placement_find(**request)).data
    for server in Server.objects.order_by("pk"):
        found[f"domain {server.hostname}"] = FailureDomainSerializer(
            failure_domain(server=server.pk)
        ).data
    found["counts"] = sorted(
        (m.cluster, m.name, n.healthy_whole, n.needing_action, n.shared_used)
        for n in fleet_counts().nodes
        for m in n.members()
    )
    return found


# In memory, for the planner alone ------------------------------------------------------

H100 = "NVIDIA H100 80GB HBM3"
NODE_IDS = itertools.count(1)


def gpu(i: int, numa: int = 0, *, server: int = 0, problem: str | None = None, **kw) -> FleetGpu:
    values: dict[str, Any] = {
        "id": server * 100 + i,
        "index": i,
        "name": H100,
        "memory_bytes": 80 * 2**30,
        "numa_node": numa,
        "mig": False,
        "problem": problem,
    }
    values.update(kw)
    return FleetGpu(**values)


def node(
    name: str,
    server: int | None,
    *,
    cluster: str = "prod",
    kind: str = "kubernetes",
    gpus: int = 8,
    used: int | None = 0,
    problems: dict[int, str] | None = None,
    actions: dict[int, str] | None = None,
    agent: bool = True,
    **kw: Any,
) -> FleetNode:
    values: dict[str, Any] = {
        "id": next(NODE_IDS),
        "name": name,
        "cluster": cluster,
        "kind": kind,
        "ready": True,
        "schedulable": True,
        "state": "idle",
        "state_flags": [],
        "reason": "",
        "partitions": [],
        "server_id": server,
        "server_hostname": name,
        "gpu_capacity": gpus,
        "whole_allocatable": gpus,
        "whole_used": used,
        "busy_indexes": set() if used == 0 else None,
        "mig_allocatable": {},
        "mig_used": {},
        "products": [],
        "memory_label_bytes": None,
    }
    values.update(kw)
    built = FleetNode(**values)
    if agent and server is not None:
        built.gpus = [
            gpu(
                i,
                i // (gpus // 2 or 1),
                server=server,
                problem=(problems or {}).get(i),
                action=(actions or {}).get(i),
            )
            for i in range(gpus)
        ]
    return built


def nvlink_fleet(*nodes: FleetNode) -> Fleet:
    share_servers(list(nodes))
    servers = {n.server_id for n in nodes if n.server_id is not None}
    return Fleet(nodes=list(nodes), classes={s: {"NV18"} for s in servers}, pairs={})


def slurm(name: str, server: int, **kw: Any) -> FleetNode:
    return node(name, server, cluster="hpc", kind="slurm", **kw)


def with_queries(read: Callable[[], Any]) -> tuple[Any, int]:
    """What `read()` returns and how many queries it took."""
    with CaptureQueriesContext(connection) as ctx:
        found = read()
    return found, len(ctx.captured_queries)
