"""The report schema's bounds are never looser than the health columns its events and
counters fill (the rule of tests/inventory/test_schema_bounds.py, on health's models).

A value the schema accepts but a column cannot hold is answered 202 and then fails in the
health sweep, which cannot pass a report it fails on: recording stops for every server.
"""

from __future__ import annotations

import pytest

from health.models import GpuCounterSample, HealthEvent
from health.services import _GPU_COUNTERS
from tests.inventory.test_schema_bounds import bound_problems, schema_at

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
        {"id", "server", "gpu", "gpu_serial", "severity", "action", "dedupe_key", "updated_at"},
    ),
}


def health_columns():
    for model, (base, renamed, excluded) in SOURCES.items():
        for field in model._meta.concrete_fields:
            path = renamed.get(field.name, (*base, field.name))
            if field.name not in excluded and path is not None:
                yield pytest.param(model, field, path, id=f"{model.__name__}.{field.name}")


@pytest.mark.parametrize(("model", "field", "path"), list(health_columns()))
def test_schema_bound_is_no_looser_than_the_health_column(model, field, path):
    try:
        node = schema_at(path)
    except KeyError:
        pytest.fail(f"{model.__name__}.{field.name}: no schema field at {'.'.join(path)}")
    assert bound_problems(field, node) == [], f"{model.__name__}.{field.name} <- {'.'.join(path)}"
