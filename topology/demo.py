"""The demo fleet: simulated servers pushed through the real API, plus scheduler snapshots.

`manage.py demo` serves the app on a private port for a moment and talks to it over HTTP
as agents and cron jobs would: the agent's own transport posts every report, and the
Kubernetes and Slurm snapshots are posted as `kubectl` and `scontrol` print them.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.core.wsgi import get_wsgi_application

K8S_CLUSTER, SLURM_CLUSTER = "prod-k8s", "hpc-slurm"


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def local_server() -> Iterator[str]:
    """This app on 127.0.0.1 and a free port, in a thread, for the duration of the block."""
    server: WSGIServer = make_server(
        "127.0.0.1", 0, get_wsgi_application(), handler_class=_QuietHandler
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(5)


def post(url: str, body: bytes, token: str, content_type: str) -> dict[str, Any]:
    request = urllib.request.Request(  # noqa: S310 - a URL this process just opened
        url,
        data=body,
        method="POST",
        headers={"Authorization": f"Token {token}", "Content-Type": content_type},
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        return json.loads(response.read() or b"{}")


def _gfd_product(name: str) -> str:
    return name.replace(" ", "-")


def kubernetes_nodes(reports: list[dict[str, Any]]) -> str:
    """`kubectl get nodes -o json` for the H100 servers and the VMs, as the device plugin and
    GPU Feature Discovery would label them, plus a node whose server runs no agent."""
    items = []
    for report in reports:
        host = report["host"]
        gpus = [g for g in report["gpus"] if g.get("status") != "error"]
        advertised = len(gpus)
        labels = {
            "kubernetes.io/hostname": host["hostname"],
            "nvidia.com/gpu.count": str(advertised),
        }
        if gpus:
            labels["nvidia.com/gpu.product"] = _gfd_product(gpus[0]["name"] or "")
            labels["nvidia.com/mig.strategy"] = "none"
        capacity = {
            "cpu": str(host.get("cpu_threads") or 8),
            "memory": "2113412000Ki",
            "pods": "110",
            "nvidia.com/gpu": str(advertised),
        }
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": host["hostname"], "labels": labels},
                "spec": {},
                "status": {
                    "addresses": [{"type": "Hostname", "address": host["hostname"]}]
                    + [{"type": "InternalIP", "address": a} for a in host.get("addresses", [])[:1]],
                    "capacity": capacity,
                    "allocatable": dict(capacity),
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                    "nodeInfo": {
                        "systemUUID": (host.get("system_uuid") or "").upper(),
                        "machineID": host.get("machine_id") or "",
                        "kubeletVersion": "v1.30.4",
                        "containerRuntimeVersion": "containerd://1.7.20",
                        "osImage": "Ubuntu 22.04.4 LTS",
                        "kernelVersion": host.get("kernel") or "",
                        "architecture": "amd64",
                    },
                },
            }
        )
    items.append(
        {  # a node whose server runs no agent yet
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "gpu-b02",
                "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            },
            "spec": {},
            "status": {
                "addresses": [{"type": "InternalIP", "address": "10.20.0.99"}],
                "capacity": {"nvidia.com/gpu": "4"},
                "allocatable": {"nvidia.com/gpu": "4"},
                "conditions": [{"type": "Ready", "status": "True"}],
                "nodeInfo": {"systemUUID": "4C4C4544-0042-3010-8052-B7C04F4E3232"},
            },
        }
    )
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}})


def kubernetes_pods(node_names: list[str]) -> str:
    """A training job of 2 pods x 8 GPUs and a notebook holding 1 GPU."""

    def pod(name: str, node: str, gpus: int) -> dict[str, Any]:
        return {
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {
                "nodeName": node,
                "containers": [
                    {"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
                ],
            },
            "status": {"phase": "Running"},
        }

    pods = [
        pod("llm-train-0", node_names[0], 8),
        pod("llm-train-1", node_names[1], 8),
        pod("notebook-ana", node_names[2], 1),
    ]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": pods, "metadata": {}})


def _gres_type(gpu_name: str) -> str:
    """The GRES type an admin would write for an NVML name: `NVIDIA H100 80GB HBM3` -> h100."""
    words = gpu_name.lower().replace("-", " ").split()
    return next((w for w in words if w[:1].isalpha() and any(c.isdigit() for c in w)), "gpu")


def slurm_nodes(reports: list[dict[str, Any]]) -> str:
    """`scontrol show node` for the Slurm side: H100s, the A100 in MIG mode, the L40S servers."""
    records = []
    for i, report in enumerate(reports):
        host = report["host"]
        gpus = report["gpus"]
        mig = [m for g in gpus for m in g.get("mig_devices", [])]
        whole = [g for g in gpus if not g.get("mig_mode_current")]
        model = _gres_type(gpus[0]["name"] if gpus else "")
        parts = [f"gpu:{model}:{len(whole)}"] if whole else []
        by_profile: dict[str, int] = {}
        for m in mig:
            by_profile[m["profile"]] = by_profile.get(m["profile"], 0) + 1
        parts += [f"gpu:{model}_{p}:{n}" for p, n in sorted(by_profile.items())]
        state = "IDLE+DRAIN" if i == len(reports) - 1 else ("MIXED" if i == 0 else "IDLE")
        used = f"gpu:{model}:4(IDX:0-3)" if i == 0 else f"gpu:{model}:0(IDX:N/A)"
        threads = host.get("cpu_threads") or 2
        cores_per_socket = max((host.get("cpu_cores") or 2) // 2, 1)
        lines = [
            f"NodeName={host['hostname']} Arch=x86_64 CoresPerSocket={cores_per_socket}",
            f"   CPUAlloc=0 CPUEfctv={threads} CPUTot={threads}",
            f"   Gres={','.join(parts) or '(null)'}",
            f"   GresUsed={used}",
            f"   NodeAddr={(host.get('addresses') or [host['hostname']])[0]} "
            f"NodeHostName={host['hostname']} Version=23.11.10",
            f"   OS=Linux {host.get('kernel') or '5.15.0'} #1 SMP",
            f"   RealMemory={(host.get('memory_total_bytes') or 2**30) // 2**20} AllocMem=0",
            f"   State={state} ThreadsPerCore=2 TmpDisk=0 Weight=1",
            "   Partitions=gpu",
            f"   CfgTRES=cpu={threads},billing={threads}",
            "   AllocTRES=",
            "   CurrentWatts=0 AveWatts=0",
        ]
        if state.endswith("DRAIN"):
            lines.append("   Reason=fan replacement [admin@2026-11-29T17:02:11]")
        records.append("\n".join(lines) + "\n\n")  # as scontrol ends a record
    return "".join(records)
