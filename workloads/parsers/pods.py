"""Placeholder until the pod grouping lands (branch h3-k8s-workloads): no pod groups."""

from __future__ import annotations

from clusters.parsers.records import PodRecord
from workloads.records import JobsSnapshot


def pods_to_workloads(pods: list[PodRecord]) -> JobsSnapshot:
    return JobsSnapshot(format="kubernetes-pods", scheduler="kubernetes", workloads=())
