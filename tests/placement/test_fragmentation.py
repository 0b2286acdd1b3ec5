"""The fleet's fragmentation: free GPUs by the largest job each could still take, stranded GPUs
on partly used nodes, per cluster; pure on plain facts, then read with running workloads and
shown on the capacity page and API."""

from __future__ import annotations

import pytest

from placement.fragmentation import NodeFree, fragmentation, fragmentation_figure, stranded_gpus
from placement.service import fleet_fragmentation
from tests.workloads.factory import workload

from .fleets import slurm_fleet


def test_stranded_gpus_are_the_free_ones_on_partly_used_nodes():
    assert stranded_gpus([(8, 0), (8, 8), (8, 3), (8, 6), (4, 1)]) == 5 + 2 + 3


def test_the_sentence_of_the_issue():
    # 8 whole nodes free would be 64; here: 2 whole nodes free (16), 16 nodes with 5 free (80)
    nodes = [NodeFree("hpc", "slurm", 8, 8, weight=2), NodeFree("hpc", "slurm", 8, 5, weight=8)]
    nodes += [NodeFree("hpc", "slurm", 8, 0, weight=10)]
    (hpc,) = fragmentation(nodes)
    assert (hpc.free_gpus, hpc.whole_nodes_free, hpc.stranded_gpus) == (56, 2, 40)
    assert hpc.histogram == {0: 10, 5: 8, 8: 2}
    assert hpc.text == (
        "56 GPUs free; the largest 8-GPU-per-node Slurm job that fits now is 2 nodes; "
        "40 free GPUs are stranded on partly used nodes"
    )
    (pods,) = fragmentation(
        [NodeFree("prod", "kubernetes", 8, 3), NodeFree("prod", "kubernetes", 4, 4)]
    )
    assert pods.largest_one_node == 4 and pods.stranded_gpus == 3
    assert "the largest pod that fits now takes 4 GPUs" in pods.text
    figure = fragmentation_figure([hpc, pods])
    assert [t["name"] for t in figure["data"]] == ["hpc", "prod"]
    assert figure["data"][0]["x"] == [0, 5, 8] and figure["data"][0]["y"] == [10, 8, 2]
    assert fragmentation_figure([])["layout"]["meta"]["empty"]


@pytest.mark.django_db
def test_running_workloads_fragment_the_fleet_on_the_capacity_page_and_api(api, client, user):
    slurm_fleet(["dgx-01", "dgx-02", "dgx-03"])
    workload("1", {"dgx-01": [0, 1, 2]})
    workload("2", {"dgx-02": list(range(8))})
    (hpc,) = fleet_fragmentation()
    assert (hpc.free_gpus, hpc.stranded_gpus, hpc.whole_nodes_free, hpc.node_size) == (13, 5, 1, 8)
    body = api.get("/api/v1/placement/capacity/", {"gpus": 80, "per_server": "8,4"}).json()
    assert body["fragmentation"][0]["text"].startswith("13 GPUs free; the largest 8-GPU-per-node")
    assert body["fragmentation"][0]["histogram"] == {"0": 1, "5": 1, "8": 1}
    client.force_login(user)
    page = client.get("/placement/", {"tab": "capacity"}).content.decode()
    assert 'id="capacity-fragmentation"' in page and "5 free GPUs are stranded" in page
