"""The workloads API: the workloads (read-only, filtered by the list page's own FilterSet), and
the snapshot endpoint's jobs listings (the rest is the clusters layer's)."""

from __future__ import annotations

import re

from django.db import transaction
from rest_framework import viewsets
from rest_framework.response import Response

from clusters.api.views import SnapshotView as NodeSnapshotView
from clusters.services import POD_FORMAT
from core.safe_input import json_loads
from workloads.services.intake import jobs_detect, jobs_ingest, pods_ingest

from .. import selectors
from ..filters import WorkloadFilter
from .serializers import WorkloadSerializer

_POD_LIST = re.compile(rb'"kind"\s*:\s*"(?:PodList|Pod)"')
_SNIFF_BYTES = 1 << 16


class SnapshotView(NodeSnapshotView):
    """`POST clusters/{name}/snapshots/`: node sets and pod lists as before; also slurmrestd
    jobs (or job) responses, `squeue --json`, `scontrol show job -d` text and accounting
    (`sacct --json`), which set the cluster's workloads and never its node set."""

    @transaction.atomic  # a pod list's GPUs in use and its pod groups land together, or neither
    def receive(self, request, name: str, raw: bytes, *, confirm_shrink: bool) -> Response:
        snapshot = jobs_detect(raw)
        if snapshot is None:
            answer = super().receive(request, name, raw, confirm_shrink=confirm_shrink)
            applied_pods = answer.status_code == 201 and answer.data.get("format") == POD_FORMAT
            # A pod list too large to apply here waits for a worker (its GPUs in use); its pod
            # groups are taken now, as a pulled cluster's are.
            stored_pods = answer.status_code == 202 and _POD_LIST.search(raw[:_SNIFF_BYTES])
            if applied_pods or stored_pods:
                workloads = pods_ingest(cluster_name=name, document=json_loads(raw.decode()))
                if workloads is not None:
                    answer.data["workloads"] = workloads.to_dict()
            return answer
        result = jobs_ingest(cluster_name=name, snapshot=snapshot)
        body = {
            "cluster": result.cluster,
            "kind": snapshot.scheduler,
            "format": result.format,
            "status": "applied",
            "nodes": None,
            "workloads": result.to_dict(),
        }
        return Response(body, status=201)


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
