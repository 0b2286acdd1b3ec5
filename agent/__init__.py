"""Cluster Atlas agent: collects a GPU server's hardware facts and pushes them to the backend.

Runs on GPU servers; never imports Django. Its only third-party dependency is nvidia-ml-py.
"""

__version__ = "0.1.0"
