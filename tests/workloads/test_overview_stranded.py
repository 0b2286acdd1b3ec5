"""The overview names the GPUs stranded on partly used nodes, as /metrics counts them."""

from __future__ import annotations

import pytest

from tests.workloads.fleet import job, listing, slurm_fleet
from workloads.selectors import gpus_stranded
from workloads.services.apply import workloads_apply

pytestmark = pytest.mark.django_db


def test_free_gpus_on_a_partly_used_node_are_stranded_on_the_overview(admin_client):
    hpc = slurm_fleet()
    workloads_apply(cluster=hpc, snapshot=listing(job("1", ("gpu-01", (0, 1)))))
    assert gpus_stranded() == {"hpc": 6}  # gpu-02 is idle: it still takes a whole-node job
    page = admin_client.get("/").content.decode()
    assert 'id="overview-stranded"' in page
    stranded = page.split('id="overview-stranded"', 1)[1].split("</a>", 1)[0]
    assert stranded.endswith(">6")
