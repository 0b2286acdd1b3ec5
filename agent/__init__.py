"""Cluster Atlas agent: collects a GPU server's hardware facts and pushes them to the backend.

Runs on GPU servers; never imports Django. Its third-party dependencies: nvidia-ml-py;
grpcio and protobuf for the kubelet's pod-resources socket (imported only when it is asked).
"""

__version__ = "0.1.0"
