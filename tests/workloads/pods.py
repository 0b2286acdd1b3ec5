"""Pod objects in the shape ``kubectl get pods -A -o json`` prints, for the workload tests."""

from __future__ import annotations

from typing import Any


def k8s_pod(
    name: str,
    *,
    namespace: str = "ml",
    node: str | None = "dgx-a",
    phase: str = "Running",
    gpus: int = 0,
    mig: dict[str, int] | None = None,
    owner: tuple[str, str] | None = None,
    labels: dict[str, str] | None = None,
    reason: str | None = None,
    terminated: str | None = None,
    start: str | None = "2026-11-30T08:00:00Z",
) -> dict[str, Any]:
    limits: dict[str, str] = {"memory": "8Gi"}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    for profile, count in (mig or {}).items():
        limits[f"nvidia.com/mig-{profile}"] = str(count)
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "creationTimestamp": "2026-11-30T07:59:58Z",
        "labels": labels or {},
    }
    if owner:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner[0],
                "name": owner[1],
                "uid": f"uid-{owner[1]}",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits}}],
        "restartPolicy": "Never",
    }
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase}
    if start:
        status["startTime"] = start
    if reason:
        status["reason"] = reason
    if terminated:
        status["containerStatuses"] = [
            {"name": "main", "state": {"terminated": {"exitCode": 137, "reason": terminated}}}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def pod_list(*pods: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(pods)}
