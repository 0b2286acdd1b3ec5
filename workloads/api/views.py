"""The workloads API: read-only, filtered by the list page's own FilterSet."""

from __future__ import annotations

from rest_framework import viewsets

from .. import selectors
from ..filters import WorkloadFilter
from .serializers import WorkloadSerializer


class WorkloadViewSet(viewsets.ReadOnlyModelViewSet):
    """What runs on the GPUs: Slurm jobs and pod groups, the GPUs each holds per node, and
    how well they are placed. Allocations are the ones held now, or an ended workload's last."""

    serializer_class = WorkloadSerializer
    filterset_class = WorkloadFilter
    lookup_value_regex = "[0-9]+"
    ordering_fields = ["id", "submitted_at", "started_at", "ended_at", "gpu_count", "node_count"]
    ordering = ["-id"]

    def get_queryset(self):
        return selectors.workload_list()
