"""What `kubectl` and `scontrol` would print for simulated servers, as a cron job posts it.

Pure functions from the servers' reports and the nodes declared for them to snapshot text:
the backend parses these exactly as it parses the real tools' output.
"""

from __future__ import annotations

import json
import uuid as uuidlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any


@dataclass(frozen=True)
class Snapshot:
    """One scheduler snapshot to post: `POST /api/v1/clusters/{cluster}/snapshots/`."""

    cluster: str
    body: str
    content_type: str


@dataclass(frozen=True)
class Pod:
    """A running pod holding whole GPUs (`nvidia.com/gpu` limits) or MIG devices (`mig`:
    profile -> count, as `nvidia.com/mig-<profile>` limits), owned by `owner` (kind, name)
    when a controller made it (a PyTorchJob's workers are one workload)."""

    name: str
    gpus: int
    owner: tuple[str, str] | None = None
    namespace: str = "ml"
    mig: tuple[tuple[str, int], ...] = ()
    started_ago_s: int = 3600


@dataclass(frozen=True)
class DemoNode:
    """A scheduler's node for one server: which cluster, and what that scheduler says of it.

    `state` and `reason` are Slurm's (Kubernetes nodes are Ready); `gpus_used` is Slurm's
    GresUsed; a Kubernetes node's use comes from its `pods`.
    """

    cluster: str
    state: str = "IDLE"
    reason: str = ""
    gpus_used: int = 0
    pods: tuple[Pod, ...] = ()


# A report with the node a scheduler keeps for its server.
Entry = tuple[dict[str, Any], DemoNode]


def _gfd_product(name: str) -> str:
    return name.replace(" ", "-")


def kubernetes_nodes(entries: Sequence[Entry]) -> str:
    """`kubectl get nodes -o json`, labelled as the device plugin and GPU Feature Discovery
    would, plus a node whose server runs no agent (gpu-b02)."""
    items = []
    for report, _node in entries:
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


def pod_uid(namespace: str, name: str) -> str:
    """A pod's stable UID in the demo (the kubelet's cgroup paths name it)."""
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"pod/{namespace}/{name}"))


def kubernetes_pods(entries: Sequence[Entry], now: datetime | None = None) -> str:
    """`kubectl get pods -A -o json`: the declared pods, running on their nodes."""

    def pod(p: Pod, node: str) -> dict[str, Any]:
        limits = {"nvidia.com/gpu": str(p.gpus)} if p.gpus else {}
        limits.update({f"nvidia.com/mig-{profile}": str(n) for profile, n in p.mig})
        metadata: dict[str, Any] = {
            "name": p.name,
            "namespace": p.namespace,
            "uid": pod_uid(p.namespace, p.name),
        }
        if p.owner:
            kind, owner = p.owner
            metadata["ownerReferences"] = [
                {
                    "apiVersion": "kubeflow.org/v1" if kind == "PyTorchJob" else "batch/v1",
                    "kind": kind,
                    "name": owner,
                    "uid": pod_uid(p.namespace, f"{kind}/{owner}"),
                    "controller": True,
                }
            ]
            metadata["labels"] = {"training.kubeflow.org/job-name": owner}
        started = (at - timedelta(seconds=p.started_ago_s)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {
            "kind": "Pod",
            "metadata": metadata,
            "spec": {
                "nodeName": node,
                "containers": [{"name": "main", "resources": {"limits": limits}}],
            },
            "status": {"phase": "Running", "startTime": started},
        }

    at = now or datetime.now(UTC)
    pods = [pod(p, report["host"]["hostname"]) for report, node in entries for p in node.pods]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": pods, "metadata": {}})


def _gres_type(gpu_name: str) -> str:
    """The GRES type an admin would write for an NVML name: `NVIDIA H100 80GB HBM3` -> h100."""
    words = gpu_name.lower().replace("-", " ").split()
    return next((w for w in words if w[:1].isalpha() and any(c.isdigit() for c in w)), "gpu")


def slurm_nodes(entries: Sequence[Entry]) -> str:
    """`scontrol show node`: whole GPUs and MIG devices as GRES, each node's declared state."""
    records = []
    for report, node in entries:
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
        used = (
            f"gpu:{model}:{node.gpus_used}(IDX:0-{node.gpus_used - 1})"
            if node.gpus_used
            else f"gpu:{model}:0(IDX:N/A)"
        )
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
            f"   State={node.state} ThreadsPerCore=2 TmpDisk=0 Weight=1",
            "   Partitions=gpu",
            f"   CfgTRES=cpu={threads},billing={threads}",
            "   AllocTRES=",
            "   CurrentWatts=0 AveWatts=0",
        ]
        if node.reason:
            lines.append(f"   Reason={node.reason}")
        records.append("\n".join(lines) + "\n\n")  # as scontrol ends a record
    return "".join(records)


@dataclass(frozen=True)
class Job:
    """A Slurm job of the demo: on each (node, GPU indices, GRES type) what Slurm gave it
    (`gres_detail`); no `nodes` while pending. `ago_s`: started (or ended) that long ago."""

    job_id: int
    name: str
    user: str
    account: str
    nodes: tuple[tuple[str, tuple[int, ...], str], ...] = ()
    state: str = "RUNNING"
    started_ago_s: int = 3600
    ended_ago_s: int | None = None
    array: tuple[int, int] | None = None  # (array job id, task id)
    ask: str = ""  # tres_per_node while pending: "gres/gpu:8"


def _number(value: int | None) -> dict[str, Any]:
    return {"set": value is not None, "infinite": False, "number": value or 0}


def _idx(indices: tuple[int, ...]) -> str:
    """`0,1,2,3,6` -> `0-3,6`, as Slurm writes an IDX list."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def slurm_jobs(jobs: Sequence[Job], now: datetime | None = None) -> str:
    """slurmrestd's `GET /slurm/v0.0.41/jobs`, as Slurm 24.05 answers (the schema of the
    real sample `slurm-restd-v0.0.41-job-13-gpu-per-node-2405-slurmweb.json`)."""
    at = int((now or datetime.now(UTC)).timestamp())
    records = []
    for job in jobs:
        started = at - job.started_ago_s if job.state != "PENDING" else None
        ended = at - job.ended_ago_s if job.ended_ago_s is not None else None
        names = [name for name, _, _ in job.nodes]
        gpus = sum(len(indices) for _, indices, _ in job.nodes)
        per_node = {len(indices) for _, indices, _ in job.nodes}
        array_job, task = job.array or (0, None)
        records.append(
            {
                "job_id": job.job_id,
                "name": job.name,
                "user_name": job.user,
                "account": job.account,
                "partition": "gpu",
                "job_state": [job.state],
                "nodes": ",".join(names),
                "node_count": _number(len(names) or 1),
                "gres_detail": [
                    f"gpu:{gres}:{len(indices)}(IDX:{_idx(indices)})"
                    for _, indices, gres in job.nodes
                ],
                "tres_per_node": job.ask
                or (f"gres/gpu:{per_node.pop()}" if len(per_node) == 1 else ""),
                "tres_alloc_str": f"cpu={16 * max(gpus, 1)},node={len(names)},billing=16"
                + (f",gres/gpu={gpus}" if gpus else ""),
                "tres_req_str": f"cpu={16 * max(gpus, 1)},node={len(names) or 1}",
                "submit_time": _number((started or at) - 120),
                "start_time": _number(started),
                "end_time": _number(ended),
                "array_job_id": _number(array_job),
                "array_task_id": _number(task),
                "het_job_id": _number(0),
                "het_job_offset": _number(0),
                "state_reason": "None" if job.state != "PENDING" else "Resources",
            }
        )
    return json.dumps(
        {
            "jobs": records,
            "last_backfill": _number(at - 10),
            "last_update": _number(at),
            "meta": {
                "plugin": {
                    "type": "openapi/slurmctld",
                    "name": "Slurm OpenAPI slurmctld",
                    "data_parser": "data_parser/v0.0.41",
                },
                "slurm": {
                    "version": {"major": "24", "micro": "3", "minor": "05"},
                    "release": "24.05.3",
                    "cluster": "hpc-slurm",
                },
            },
            "errors": [],
            "warnings": [],
        }
    )
