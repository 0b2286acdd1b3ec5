"""The report schema's bounds are never looser than the health columns its events and
counters fill (the rule of tests/inventory/test_schema_bounds.py, on health's models).

A value the schema accepts but a column cannot hold is answered 202 and then fails in the
health sweep, which cannot pass a report it fails on: recording stops for every server.
"""

from __future__ import annotations

import pytest

from health.models import GpuCounterSample, HealthEvent
from health.services import _GPU_COUNTERS
from tests.inventory.test_schema_bounds import assert_bound_no_looser, source_columns

GPU = ("gpus", "*")
SOURCES = {
    GpuCounterSample: (
        (*GPU, "health"),
        {sample: (*GPU, field) for field, sample in _GPU_COUNTERS.items()}
        | {"pci_bus_id": (*GPU, "pci_bus_id")},
        {"id", "gpu", "server", "taken_at", "current"},
    ),
    HealthEvent: (
        ("events", "*"),
        {"first_seen": None, "last_seen": None},  # parsed times, not strings
        # `holder` is filled by the workloads layer, never by a report
        {
            "id",
            "server",
            "gpu",
            "gpu_serial",
            "severity",
            "action",
            "dedupe_key",
            "updated_at",
            "holder",
        },
    ),
}


@pytest.mark.parametrize(("model", "field", "path"), source_columns(SOURCES))
def test_schema_bound_is_no_looser_than_the_health_column(model, field, path):
    assert_bound_no_looser(model, field, path)
