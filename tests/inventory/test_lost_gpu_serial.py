"""A lost GPU keeps the last serial NVML gave it: the serial is what an RMA asks for. Neither
the report that loses it, nor one whose walk of that GPU failed before its serial, nor a
partial report wipes it."""

from __future__ import annotations

import copy
import json

import pytest

from inventory.choices import GpuStatus
from inventory.models import Gpu
from inventory.services import agent_token_create, report_apply, report_receive
from tests.reports import make_report
from tests.topology.server_fleet import fell_off_the_bus

pytestmark = pytest.mark.django_db


@pytest.fixture
def push():
    token = agent_token_create(name="t")[0]

    def push(report):
        token.refresh_from_db()
        received = report_receive(token=token, body=json.dumps(report).encode())
        if received.status != "unchanged":
            report_apply(report_id=received.report_id)

    return push


def test_a_gpu_that_fell_off_the_bus_keeps_its_serial_through_every_later_report(push):
    full = make_report("dgx-01")
    serial = full["gpus"][5]["serial"]
    push(full)
    lost = fell_off_the_bus(full)
    push(lost)
    gpu = Gpu.objects.get(uuid=full["gpus"][5]["uuid"])
    assert (gpu.status, gpu.serial, gpu.index) == (GpuStatus.LOST, serial, 5)
    again = copy.deepcopy(lost)
    again["collected_at"] = "2026-11-30T09:00:00Z"
    again["host"]["kernel"] = "6.8.0-2"  # a change, so the report is applied in full again
    push(again)
    partial = copy.deepcopy(lost)
    partial.update(partial=True, partial_reason="nvidia-smi -L")
    for g in partial["gpus"]:
        g["serial"] = None
    push(partial)
    gpu.refresh_from_db()
    assert (gpu.status, gpu.serial) == (GpuStatus.LOST, serial)
    # and the live GPUs the partial report gave no serial keep theirs too
    assert not Gpu.objects.filter(serial="").exists()


def test_a_gpu_whose_walk_failed_before_its_serial_keeps_the_serial_it_had(push):
    full = make_report("dgx-01")
    serial = full["gpus"][3]["serial"]
    push(full)
    failing = copy.deepcopy(full)
    failing["gpus"][3].update(
        serial=None, status="error", error="GPU is lost (while reading serial)"
    )
    push(failing)
    gpu = Gpu.objects.get(uuid=full["gpus"][3]["uuid"])
    assert (gpu.status, gpu.serial) == (GpuStatus.ERROR, serial)
    push(fell_off_the_bus(full, slot=3))
    gpu.refresh_from_db()
    assert (gpu.status, gpu.serial) == (GpuStatus.LOST, serial)
