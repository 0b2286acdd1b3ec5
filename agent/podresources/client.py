"""A client of the kubelet's pod-resources socket: the device ids each container holds.

The Kubernetes API says a pod asked for `nvidia.com/gpu: 2`; only the kubelet knows which
two (the device plugin's ids: GPU UUIDs, MIG UUIDs, `<uuid>::<n>` replicas when
time-sliced). `List` answers for every pod on the node; only NVIDIA resources are kept.

It never raises: without the socket (not mounted into the agent's pod, no kubelet, no
permission), on an older kubelet without v1 (UNIMPLEMENTED) or a kubelet too slow to answer,
the report says `{"available": false, "error": "<why>", "pods": []}` and the backend keeps
counts only.
"""

from __future__ import annotations

import os
import stat
from typing import Any

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
GPU_RESOURCE_PREFIX = "nvidia.com/"
# The schema's bounds
MAX_PODS = 1024
MAX_CONTAINERS = 64
MAX_DEVICES = 64
MAX_ERROR = 500
# The kubelet's own limit on a List answer is 16 MiB; a node with thousands of pods nears it.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def unavailable(reason: str) -> dict[str, Any]:
    return {"available": False, "error": reason[:MAX_ERROR], "pods": []}


def is_gpu_resource(name: str) -> bool:
    """`nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`, `nvidia.com/gpu.shared`: NVIDIA's device
    plugin's resources; CPUs, memory, NICs (`rdma/...`) and other vendors' are left out."""
    return name.startswith(GPU_RESOURCE_PREFIX)


def pod_resources_dict(response: Any) -> dict[str, Any]:
    """A `ListPodResourcesResponse` as the report's `pod_resources`: pods and containers
    holding at least one NVIDIA device, sorted, within the schema's bounds."""
    pods: list[dict[str, Any]] = []
    for pod in response.pod_resources:
        containers = []
        for container in pod.containers:
            devices = [
                {"resource": d.resource_name, "ids": sorted(d.device_ids)[:MAX_DEVICES]}
                for d in container.devices
                if is_gpu_resource(d.resource_name) and d.device_ids
            ]
            if devices:
                devices.sort(key=lambda d: d["resource"])
                containers.append({"name": container.name, "devices": devices[:MAX_DEVICES]})
        if containers:
            containers.sort(key=lambda c: c["name"])
            pods.append(
                {
                    "namespace": pod.namespace,
                    "name": pod.name,
                    "containers": containers[:MAX_CONTAINERS],
                }
            )
    pods.sort(key=lambda p: (p["namespace"], p["name"]))
    return {"available": True, "error": None, "pods": pods[:MAX_PODS]}


def _socket_problem(socket: str) -> str | None:
    """Why the socket cannot be used, before gRPC is asked (its own errors are vaguer)."""
    try:
        mode = os.stat(socket).st_mode
    except FileNotFoundError:
        return f"no kubelet pod-resources socket at {socket} (not mounted, or no kubelet)"
    except PermissionError:
        return f"permission denied reading {socket}"
    except OSError as exc:
        return f"cannot use {socket}: {exc.strerror}"
    if not stat.S_ISSOCK(mode):
        return f"{socket} is not a socket"
    if not os.access(socket, os.R_OK | os.W_OK):
        return f"permission denied on {socket} (the agent needs root or the socket's group)"
    return None


def list_pod_resources(socket: str = DEFAULT_SOCKET, timeout_s: float = 5) -> dict[str, Any]:
    """The report's `pod_resources` from the kubelet's `List`, or why it is unavailable."""
    problem = _socket_problem(socket)
    if problem:
        return unavailable(problem)
    try:
        import grpc

        from . import api_pb2, api_pb2_grpc
    except ImportError as exc:  # the agent installed without its gRPC dependencies
        return unavailable(f"grpcio/protobuf not installed: {exc}")
    options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
    try:
        with grpc.insecure_channel(f"unix://{os.path.abspath(socket)}", options=options) as ch:
            stub = api_pb2_grpc.PodResourcesListerStub(ch)
            response = stub.List(api_pb2.ListPodResourcesRequest(), timeout=timeout_s)
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else None
        if code == grpc.StatusCode.UNIMPLEMENTED:
            return unavailable(
                "the kubelet does not serve podresources v1 List (older than Kubernetes 1.20?)"
            )
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return unavailable(f"the kubelet did not answer within {timeout_s:g} s")
        details = exc.details() if hasattr(exc, "details") else str(exc)
        name = code.name if code is not None else "error"
        return unavailable(f"kubelet pod-resources List failed: {name}: {details}")
    return pod_resources_dict(response)
