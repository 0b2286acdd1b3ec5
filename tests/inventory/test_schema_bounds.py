"""The report schema's bounds are never looser than the columns the report fills.

A value the schema accepts but a column cannot hold (a 2^31 core count, a 200-character
compute capability) passed validation, was answered 202, and failed in the worker. This
walks every column of the models reports fill and finds its field in the schema; a new
column must be mapped here or listed as not coming from reports.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import models
from django.db.backends.base.operations import BaseDatabaseOperations

from agent.schema import load_schema
from inventory.models import Disk, Gpu, Guest, Link, MigDevice, Nic, Server

# model -> (path of the schema object whose properties fill it, renamed fields, not from reports)
SOURCES: dict[type[models.Model], tuple[tuple[str, ...], dict[str, tuple[str, ...]], set[str]]] = {
    Server: (
        ("host",),
        {
            "driver_version": ("driver", "driver_version"),
            "cuda_version": ("driver", "cuda_version"),
            "nvml_version": ("driver", "nvml_version"),
            "nvml_error": ("nvml_error",),
            "agent_version": ("agent", "version"),
            "agent_source": ("agent", "source"),
            "nvswitch_count": ("nvswitch_count",),
            "pci_gpus": ("pci_gpus",),
            "warnings": ("warnings",),
            "is_virtual": ("host", "virtualization", "is_virtual"),
            "hypervisor": ("host", "virtualization", "hypervisor"),
            "last_report_partial": ("partial",),
            "last_report_partial_reason": ("partial_reason",),
            "declared_kubernetes_node": ("host", "kubernetes_node_name"),
            "declared_slurm_node": ("host", "slurm_node_name"),
        },
        {
            "id",
            "identity",  # derived: uuid:/machine-id:/hostname: + a bounded value (max 300)
            "pci_gpu_count",  # derived from pci_gpus
            "physical_host",
            "physical_host_manual",
            "hardware_profile",
            "rack",
            "rack_position",
            "first_seen",
            "last_seen",
            "last_report",
            "last_report_hash",
            "placement_shape",  # topology's, of the facts applied
        },
    ),
    Gpu: (("gpus", "*"), {}, {"id", "server", "first_seen", "last_seen"}),
    MigDevice: (("gpus", "*", "mig_devices", "*"), {}, {"id", "gpu"}),
    Nic: (("nics", "*"), {}, {"id", "server", "switch", "switch_port"}),
    Guest: (("host", "guests", "*"), {}, {"id", "host"}),
    Disk: (("disks", "*"), {}, {"id", "server"}),
    Link: (
        ("links", "*"),
        {},
        {
            "id",
            "server",
            "gpu_a",
            "gpu_b",
            "nic",
            "nic_a",
            "nic_b",
            "nvlink_count",
        },  # nvlink_count: NV<n>, n<1000
    ),
}
INTEGER_RANGES = BaseDatabaseOperations.integer_field_ranges


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        pointer = node["$ref"].removeprefix("#/").split("/")
        node = load_schema()
        for part in pointer:
            node = node[part]
    return node


def schema_at(path: tuple[str, ...]) -> dict[str, Any]:
    node = _resolve(load_schema())
    for part in path:
        node = _resolve(node["items"] if part == "*" else node["properties"][part])
    return node


def _types(node: dict[str, Any]) -> set[str]:
    if "enum" in node:
        return {type(v).__name__ for v in node["enum"]}
    kind = node.get("type", [])
    return set(kind if isinstance(kind, list) else [kind])


def bound_problems(field: models.Field, node: dict[str, Any]) -> list[str]:
    """Why `node` may accept a value `field` cannot store; empty when it may not."""
    internal = field.get_internal_type()
    if internal in INTEGER_RANGES:
        low, high = INTEGER_RANGES[internal]
        problems = []
        if node.get("minimum", float("-inf")) < low:
            problems.append(f"minimum {node.get('minimum')} < {low}")
        if node.get("maximum", float("inf")) > high:
            problems.append(f"maximum {node.get('maximum')} > {high}")
        return problems
    if internal == "FloatField":
        return [] if "maximum" in node else ["a number without a maximum"]
    if internal in ("CharField", "SlugField"):
        if "enum" in node:
            longest = max(len(v) for v in node["enum"] if isinstance(v, str))
            return [] if longest <= field.max_length else [f"enum value of {longest} chars"]
        if node.get("maxLength", float("inf")) > field.max_length:
            return [f"maxLength {node.get('maxLength')} > max_length {field.max_length}"]
        return []
    if internal == "TextField":
        return [] if "maxLength" in node else ["a string without maxLength"]
    if internal == "BooleanField":
        return [] if _types(node) <= {"boolean", "null", "bool", "NoneType"} else ["not boolean"]
    if internal == "JSONField":
        return [] if "maxItems" in node or "properties" in node else ["unbounded JSON"]
    return [f"no rule for {internal}"]


def source_columns(sources: dict) -> list[Any]:
    """One param (model, field, schema path) per column the report fills; a column renamed to
    None has no schema field of its own (e.g. a parsed time) and is left out."""
    params = []
    for model, (base, renamed, excluded) in sources.items():
        for field in model._meta.concrete_fields:
            path = renamed.get(field.name, (*base, field.name))
            if field.name not in excluded and path is not None:
                params.append(pytest.param(model, field, path, id=f"{model.__name__}.{field.name}"))
    return params


def assert_bound_no_looser(model: type[models.Model], field: models.Field, path) -> None:
    """The schema field at `path` exists and bounds what it accepts to what `field` holds."""
    try:
        node = schema_at(path)
    except KeyError:
        pytest.fail(f"{model.__name__}.{field.name}: no schema field at {'.'.join(path)}")
    assert bound_problems(field, node) == [], f"{model.__name__}.{field.name} <- {'.'.join(path)}"


@pytest.mark.parametrize(("model", "field", "path"), source_columns(SOURCES))
def test_schema_bound_is_no_looser_than_the_column(model, field, path):
    assert_bound_no_looser(model, field, path)


def test_the_rule_catches_a_looser_bound():
    cores = Server._meta.get_field("cpu_cores")
    capability = Gpu._meta.get_field("compute_capability")
    assert bound_problems(cores, {"type": "integer", "minimum": 0}) == ["maximum None > 2147483647"]
    assert bound_problems(capability, {"type": "string", "maxLength": 128}) == [
        "maxLength 128 > max_length 16"
    ]
