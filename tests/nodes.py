"""Hand-built scheduler outputs for reconciliation tests, in the tools' own formats."""

from __future__ import annotations

import json
from typing import Any


def k8s_node(
    name: str,
    *,
    system_uuid: str = "",
    machine_id: str = "",
    gpus: int | None = 8,
    allocatable: int | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    labels: dict[str, str] | None = None,
    extra_resources: dict[str, int] | None = None,
    address: str = "192.168.255.1",
) -> dict[str, Any]:
    capacity: dict[str, str] = {"cpu": "224", "memory": "2113412000Ki", "pods": "110"}
    alloc = dict(capacity)
    if gpus is not None:
        capacity["nvidia.com/gpu"] = str(gpus)
        alloc["nvidia.com/gpu"] = str(gpus if allocatable is None else allocatable)
    for resource, count in (extra_resources or {}).items():
        capacity[resource] = alloc[resource] = str(count)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": name},
            ],
            "capacity": capacity,
            "allocatable": alloc,
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}
            ],
            "nodeInfo": {
                "systemUUID": system_uuid.upper(),
                "machineID": machine_id,
                "kubeletVersion": "v1.30.2",
                "containerRuntimeVersion": "containerd://1.7.18",
                "osImage": "Ubuntu 22.04.4 LTS",
                "kernelVersion": "5.15.0-113-generic",
                "architecture": "amd64",
            },
        },
    }


def k8s_node_list(*nodes: dict[str, Any]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(nodes), "metadata": {}})


def scontrol_node(
    name: str,
    *,
    hostname: str | None = None,
    addr: str | None = None,
    gres: str = "gpu:h100:8",
    state: str = "IDLE",
    reason: str | None = None,
) -> str:
    lines = [
        f"NodeName={name} Arch=x86_64 CoresPerSocket=56",
        "   CPUAlloc=0 CPUEfctv=224 CPUTot=224 CPULoad=0.10",
        f"   Gres={gres}",
        f"   NodeAddr={addr or name} NodeHostName={hostname or name} Version=23.11.4",
        "   OS=Linux 5.15.0-113-generic #123-Ubuntu SMP Mon Jun 10 08:16:17 UTC 2024",
        "   RealMemory=2000000 AllocMem=0 FreeMem=1900000 Sockets=2 Boards=1",
        f"   State={state} ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A",
        "   Partitions=gpu",
        "   BootTime=2026-11-30T07:00:00 SlurmdStartTime=2026-11-30T07:01:00",
        "   LastBusyTime=2026-11-30T07:30:00 ResumeAfterTime=None",
        "   CfgTRES=cpu=224,mem=2000000M,billing=224",
        "   AllocTRES=",
        "   CurrentWatts=0 AveWatts=0",
    ]
    if reason:
        lines.append(f"   Reason={reason} [root@2026-11-30T08:00:00]")
    return "\n".join(lines) + "\n\n"  # scontrol ends every record with a blank line


def scontrol_text(*nodes: str) -> str:
    return "".join(nodes)
