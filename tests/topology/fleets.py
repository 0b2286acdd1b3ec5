"""Hand-built fleets for placement and failure-domain tests: reports, snapshots, reconcile."""

from __future__ import annotations

from typing import Any

from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
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
