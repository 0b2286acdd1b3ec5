"""Node records are checked against the Node columns before anything is written."""

from __future__ import annotations

from clusters.parsers import NodeRecord
from clusters.validation import node_record_errors


def test_a_valid_record_has_no_errors():
    record = NodeRecord(name="gpu-01", kind="slurm", cpus=224, memory_bytes=2**41, gpu_capacity=8)
    assert node_record_errors([record]) == {}


def test_duplicates_empty_names_and_wrong_types_are_named_by_node_and_field():
    records = [
        NodeRecord(name="a", kind="slurm"),
        NodeRecord(name="a", kind="slurm", cpus=True),
        NodeRecord(name=" ", kind="slurm", gpu_used=-1),
    ]
    errors = node_record_errors(records)
    assert errors["nodes.1.name"] == ["node 'a': appears twice (first as node 0)"]
    assert errors["nodes.1.cpus"] == ["node 'a': expected a whole number, got bool"]
    assert errors["nodes.2.name"] == ["node ' ': a node needs a name"]
    assert "outside 0..2147483647" in errors["nodes.2.gpu_used"][0]


def test_lists_maps_and_gres_are_bounded():
    record = NodeRecord(
        name="n" * 300,
        kind="kubernetes",
        addresses=["10.0.0.1"] * 300,
        gres=[{"name": "vmem", "type": None, "count": 2**63, "used": None}],
        resources={"nvidia.com/mig-1g.10gb": {"capacity": 10**30, "allocatable": 7}},
        mig_resources={"1g.10gb": -3},
        taints=[{"key": "k", "value": "v" * 2000, "effect": "NoSchedule"}],
    )
    errors = node_record_errors([record])
    assert set(errors) == {
        "nodes.0.name",
        "nodes.0.addresses",
        "nodes.0.gres.0.count",
        "nodes.0.resources.nvidia.com/mig-1g.10gb.capacity",
        "nodes.0.mig_resources.1g.10gb",
        "nodes.0.taints.0",
    }
    assert errors["nodes.0.name"][0].startswith("node '" + "n" * 57 + "...'")
    assert "a 31-digit number" in errors["nodes.0.resources.nvidia.com/mig-1g.10gb.capacity"][0]
