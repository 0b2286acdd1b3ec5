"""A workload holding more GPUs on one node than any node holds is refused, field-level,
before its allocations are built: each GPU is a row, and 2**31 of them would exhaust the
process that applies the listing."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from clusters.services import snapshot_ingest
from tests.nodes import k8s_node, k8s_node_list
from workloads.models import Allocation, Workload

pytestmark = pytest.mark.django_db


def _pod_list(gpus: int) -> str:
    pod = {
        "kind": "Pod",
        "metadata": {"name": "big", "namespace": "ml", "uid": "uid-big"},
        "spec": {
            "nodeName": "dgx-01",
            "containers": [{"name": "m", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": "Running", "startTime": "2026-12-01T10:00:00Z"},
    }
    return json.dumps({"kind": "List", "items": [pod]})


def test_a_pod_holding_more_gpus_than_any_node_is_a_400_naming_the_allocation(staff):
    snapshot_ingest(cluster_name="k8s", raw=k8s_node_list(k8s_node("dgx-01")))
    client = APIClient()
    client.force_authenticate(staff)
    response = client.generic(
        "POST", "/api/v1/clusters/k8s/snapshots/", _pod_list(5000), "application/json"
    )
    assert response.status_code == 400, response.content
    (message,) = response.json()["errors"]["workloads[0].allocations[0].gpu_count"]
    assert message == "workload 'ml/big' holds 5000 GPUs on node 'dgx-01'; at most 4096"
    assert not Workload.objects.exists() and not Allocation.objects.exists()


def test_a_pod_holding_every_gpu_of_a_large_node_is_applied(staff):
    snapshot_ingest(cluster_name="k8s", raw=k8s_node_list(k8s_node("dgx-01")))
    client = APIClient()
    client.force_authenticate(staff)
    response = client.generic(
        "POST", "/api/v1/clusters/k8s/snapshots/", _pod_list(384), "application/json"
    )
    assert response.status_code == 201, response.content
    assert Workload.objects.get().gpu_count == 384 and Allocation.objects.count() == 384
