"""NVLink domains (GB200 NVL72 racks) from the GPUs' NVLink fabric cluster uuid and clique
id, and Slurm's block topology of them in topology.yaml beside the tree."""

from __future__ import annotations

import pytest
import yaml

from fabric.graph import nvlink_domains
from fabric.services import fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from tests.reports import apply_reports, make_report

RACK_A = "88e955db-1769-549b-8bd0-dea5ed7df1b4"
RACK_B = "0f6a3e44-52c1-4b9e-9d0e-7d3d9f2d8a10"


def test_hosts_sharing_a_cluster_uuid_and_clique_make_a_domain():
    gpus = [("h1", RACK_A, 1), ("h1", RACK_A, 1), ("h2", RACK_A.upper(), 1), ("h2", RACK_A, 1)]
    gpus += [("h3", RACK_A, 2), ("h4", RACK_A, 2), ("h4", "", None)]  # another clique
    gpus += [("h5", RACK_B, 1)]  # alone: no domain between hosts
    gpus += [("h6", RACK_B, 3), ("h6", RACK_A, 1), ("h6", RACK_A, 1)]  # most of its GPUs win
    gpus += [("h7", "", None)]
    assert nvlink_domains(gpus) == {(RACK_A, 1): ["h1", "h2", "h6"], (RACK_A, 2): ["h3", "h4"]}


def _nvl(report: dict, cluster_uuid: str, clique: int) -> dict:
    for gpu in report["gpus"]:
        gpu.update(fabric_cluster_uuid=cluster_uuid, fabric_clique_id=clique)
    return report


@pytest.mark.django_db
def test_topology_yaml_adds_a_block_topology_of_the_fabrics_nvlink_domains(api):
    built = synthetic_fabric(servers=6, rails=2, servers_per_leaf=2)
    reports = [make_report(host, gpus=4) for host in built.servers]
    for report in reports[:3]:
        _nvl(report, RACK_A, 7)
    for report in reports[3:5]:
        _nvl(report, RACK_B, 7)
    apply_reports(*reports)
    fabric_snapshot_ingest(fabric_name="nvl", raw=built.text)
    text = api.get("/api/v1/fabrics/nvl/topology.yaml").content.decode()
    document = yaml.safe_load(text)
    assert [t["topology"] for t in document] == ["nvl", "nvl-nvlink"]
    assert document[0]["cluster_default"] is True and "tree" in document[0]
    assert document[1]["block"]["blocks"] == [
        {"block": "nvl1", "nodes": "gpu[00001-00003]"},
        {"block": "nvl2", "nodes": "gpu[00004-00005]"},
    ]
    assert f"# nvl1: NVLink domain {RACK_A}/7" in text


@pytest.mark.django_db
def test_topology_yaml_without_nvlink_domains_is_the_tree_alone(api):
    built = synthetic_fabric(servers=2, rails=1, servers_per_leaf=2)
    apply_reports(*(make_report(host, gpus=4) for host in built.servers))
    fabric_snapshot_ingest(fabric_name="plain", raw=built.text)
    document = yaml.safe_load(api.get("/api/v1/fabrics/plain/topology.yaml").content)
    assert [t["topology"] for t in document] == ["plain"]
