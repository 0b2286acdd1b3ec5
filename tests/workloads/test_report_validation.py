"""A report whose kubelet view names a device the report does not have is refused with a
400 naming the id at fault, and nothing is stored."""

from __future__ import annotations

import pytest

from agent.schema import load_schema
from inventory.models import Report, Server
from inventory.validation import _check_pod_devices, report_errors
from tests.reports import gpu_uuid, make_report
from tests.workloads.gpu_facts import pods_view

WITH_POD_RESOURCES = "pod_resources" in load_schema()["properties"]
needs_schema = pytest.mark.skipif(
    not WITH_POD_RESOURCES, reason="the report schema has no pod_resources yet"
)


def errors_of(view: dict, devices: set[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    _check_pod_devices(view, devices, lambda path, m: found.setdefault(path, []).append(m))
    return found


def test_device_ids_must_name_a_gpu_or_mig_device_of_the_report():
    gpu, mig = "GPU-aaaa", "MIG-bbbb"
    view = pods_view(
        ("ml", "p0", "main", [gpu, gpu.upper() + "::3"]),
        ("ml", "p1", "main", [mig, "GPU-nope"]),
    )
    assert errors_of(view, {gpu.lower(), mig.lower()}) == {
        "pod_resources.pods.1.containers.0.devices.0.ids.1": [
            "no GPU or MIG device GPU-nope in this report."
        ]
    }


@needs_schema
def test_a_report_naming_another_servers_gpu_is_invalid():
    report = make_report("gpu-k01", gpus=2)
    report["pod_resources"] = pods_view(
        ("ml", "p0", "main", [gpu_uuid("gpu-k01", 1)]),
        ("ml", "p1", "main", [gpu_uuid("gpu-k99", 0)]),
    )
    assert list(report_errors(report)) == ["pod_resources.pods.1.containers.0.devices.0.ids.0"]
    report["partial"] = True
    assert report_errors(report) == {}


@needs_schema
@pytest.mark.django_db
def test_post_reports_answers_400_and_stores_nothing(post_report, agent_token):
    report = make_report("gpu-k01", gpus=2)
    report["pod_resources"] = pods_view(("ml", "p0", "main", ["GPU-elsewhere::1"]))
    response = post_report(report, agent_token)
    assert response.status_code == 400, response.content
    assert "pod_resources.pods.0.containers.0.devices.0.ids.0" in response.json()["errors"]
    assert not Report.objects.exists() and not Server.objects.exists()
