"""The kubelet's pod-resources API (gRPC `v1.PodResourcesLister`): which pod holds which GPU.

`api.proto` is the published `podresources/v1` proto; `api_pb2.py` and `api_pb2_grpc.py` are
generated from it (`regenerate.sh`) and kept here, so the agent needs no protoc at install.
"""

from .client import DEFAULT_SOCKET, GPU_RESOURCE_PREFIX, list_pod_resources, pod_resources_dict

__all__ = ["DEFAULT_SOCKET", "GPU_RESOURCE_PREFIX", "list_pod_resources", "pod_resources_dict"]
