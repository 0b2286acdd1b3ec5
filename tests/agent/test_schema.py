import copy
import json

import pytest

from agent.schema import load_schema, normalize_pci_bus_id
from inventory.validation import report_errors

from .conftest import REPO


def test_pci_bus_ids_from_nvml_and_sysfs_compare_equal():
    assert normalize_pci_bus_id("00000000:19:00.0") == normalize_pci_bus_id("0000:19:00.0")
    assert normalize_pci_bus_id("0000:1B:00.0") == "0000:1b:00.0"
    assert normalize_pci_bus_id("N/A") is None


def test_schema_names_its_version():
    assert load_schema()["properties"]["schema"]["const"] == "cluster-atlas/report/v1"


def test_max_warnings_is_the_schemas_bound():
    from agent.schema import MAX_WARNINGS, load_schema

    assert load_schema()["properties"]["warnings"]["maxItems"] == MAX_WARNINGS


# -- what runs on the GPUs: processes and pod_resources ---------------------------------------


@pytest.fixture
def example() -> dict:
    return json.loads((REPO / "docs" / "report-example.json").read_text())


def test_the_example_carries_processes_and_pod_resources_the_backend_accepts(example):
    assert report_errors(example) == {}
    assert example["gpus"][4]["processes"][0]["workload"]["scheduler"] == "slurm"
    assert example["gpus"][0]["mig_devices"][0]["processes"][0]["workload"]["pod_uid"]
    assert example["pod_resources"]["available"] is True


def test_unknown_and_null_process_lists_are_accepted(example):
    example["gpus"][0]["processes"] = None
    example["gpus"][0]["mig_devices"][0]["processes"] = None
    example["pod_resources"] = {"available": False, "error": "no socket", "pods": []}
    assert report_errors(example) == {}


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda r: r["gpus"][4]["processes"][0].update(pid=0), "gpus.4.processes.0.pid"),
        (lambda r: r["gpus"][4]["processes"][0].update(pid=2**31), "gpus.4.processes.0.pid"),
        (lambda r: r["gpus"][4]["processes"][0].update(pid="51007"), "gpus.4.processes.0.pid"),
        (
            lambda r: r["gpus"][4]["processes"][0].update(used_memory_bytes=-1),
            "gpus.4.processes.0.used_memory_bytes",
        ),
        (
            lambda r: r["gpus"][4]["processes"][0].update(name="x" * 257),
            "gpus.4.processes.0.name",
        ),
        (
            lambda r: r["gpus"][4]["processes"][0]["workload"].update(id=5679),
            "gpus.4.processes.0.workload",
        ),
        (
            lambda r: r["gpus"][4]["processes"][0].update(workload={"scheduler": "pbs"}),
            "gpus.4.processes.0.workload",
        ),
        (
            lambda r: r["gpus"][0]["mig_devices"][0]["processes"][0].pop("workload"),
            "gpus.0.mig_devices.0.processes.0.workload",
        ),
        (lambda r: r["gpus"][1].update(processes=[{}] * 513), "gpus.1.processes"),
        (lambda r: r["pod_resources"].update(available="yes"), "pod_resources.available"),
        (lambda r: r["pod_resources"].pop("error"), "pod_resources.error"),
        (
            lambda r: r["pod_resources"]["pods"][0].update(namespace="n" * 64),
            "pod_resources.pods.0.namespace",
        ),
        (
            lambda r: r["pod_resources"]["pods"][0]["containers"][0]["devices"][0].update(
                ids="MIG-1"
            ),
            "pod_resources.pods.0.containers.0.devices.0.ids",
        ),
        (lambda r: r["pod_resources"].update(extra=1), "pod_resources"),
    ],
)
def test_wrong_process_and_pod_fields_are_refused_with_their_path(example, change, path):
    report = copy.deepcopy(example)
    change(report)
    errors = report_errors(report)
    assert path in errors, errors
