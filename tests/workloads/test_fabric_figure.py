"""The workload page draws its servers on the fabric: the demo's 2 × 8 training job under
its rail leaves, a one-node job and a fabric-less cluster said in words, and the reads cost
the same queries whatever the fleet's or the workload's size."""

from __future__ import annotations

import json
import re

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fabric.models import Fabric
from fabric.selectors import servers_on_fabric
from fabric.services import fabric_rebind, fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from tests.workloads.factories import fleet, workload
from workloads.models import Workload


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def on_fabric(servers: int):
    """`servers` 8-GPU servers, two a leaf on 8 rails under 2 spines, bound to their nodes."""
    built = synthetic_fabric(servers=servers, rails=8, servers_per_leaf=2, spines_per_pod=2)
    fabric_snapshot_ingest(fabric_name="ib", raw=built.text)
    cluster, nodes = fleet(tuple(built.servers))
    fabric_rebind(fabric=Fabric.objects.get(name="ib"))
    return cluster, [nodes[h] for h in built.servers]


def _figure(page: str, name: str) -> dict:
    blob = re.search(
        rf'<script id="figure-{name}-data" type="application/json">(.*?)</script>', page, re.S
    )
    assert blob is not None, f"no figure {name}"
    return json.loads(blob.group(1))


def _queries(client, path: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(path).status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.django_db
@pytest.mark.parametrize("servers", [4, 24])
def test_the_servers_reads_cost_three_queries_whatever_the_fleet(
    servers, django_assert_num_queries
):
    _, nodes = on_fabric(servers)
    wanted = {n.server_id: 8 for n in nodes[: servers // 2]}
    with django_assert_num_queries(3):
        on = servers_on_fabric(wanted)
    assert on is not None and len(on.facts.hosts) == servers // 2
    leaves = [s for s in on.facts.switches if s.tier == 1]
    assert len(leaves) == 8 * servers // 4  # their units' rail leaves, no other
    assert {s.name for s in on.facts.switches if s.tier == 2} == {"spine-p001-01", "spine-p001-02"}


@pytest.mark.django_db
def test_the_workload_page_costs_the_same_queries_for_a_small_and_a_large_job_on_a_fabric(
    signed_in,
):
    cluster, nodes = on_fabric(24)
    small = workload(cluster, "1", {nodes[0]: range(8), nodes[1]: range(8)})
    large = workload(cluster, "2", {n: range(8) for n in nodes[2:20]})
    assert _queries(signed_in, f"/workloads/{small.pk}/") == _queries(
        signed_in, f"/workloads/{large.pk}/"
    )
    page = signed_in.get(f"/workloads/{large.pk}/").content.decode()
    title = _figure(page, "workload-fabric")["layout"]["title"]["text"]
    assert "18 servers under 72 leaves, across spines spine-p001-01…02" in title
    assert "3 switches between them (drawn: 60 of 74 switches)" in title


@pytest.mark.django_db
def test_a_one_node_job_and_a_fabric_less_cluster_say_why_there_is_no_figure(signed_in):
    cluster, nodes = fleet(("dgx-01", "dgx-02"))
    one = workload(cluster, "1", {nodes["dgx-01"]: [0, 1]})
    two = workload(cluster, "2", {nodes["dgx-01"]: [2], nodes["dgx-02"]: [0]})
    page = signed_in.get(f"/workloads/{one.pk}/").content.decode()
    assert "One node: no switch between its GPUs." in page
    assert "figure-workload-fabric" not in page
    page = signed_in.get(f"/workloads/{two.pk}/").content.decode()
    assert "No fabric known for these servers." in page
    assert "figure-workload-fabric" not in page


@pytest.mark.django_db(transaction=True)
def test_the_demos_training_job_is_drawn_under_its_rail_leaves(signed_in):
    call_command("demo")
    train = Workload.objects.get(scheduler_id="ml/llm-train")
    page = signed_in.get(f"/workloads/{train.pk}/").content.decode()
    figure = _figure(page, "workload-fabric")
    title = figure["layout"]["title"]["text"]
    assert "Fabric demo-ib: 2 servers under one leaf: ib-leaf-r1…r8 (8 rails)" in title
    assert "1 switch between them" in title
    traces = {t["name"]: t for t in figure["data"]}
    assert traces["the workload's servers"]["texttemplate"] == [
        "dgx-h100-01: 8 GPUs",
        "dgx-h100-02: 8 GPUs",
    ]
    assert set(traces["switches on its paths"]["texttemplate"]) == {
        f"ib-leaf-r{r}" for r in range(1, 9)
    }
    assert set(traces["other switches"]["texttemplate"]) == {"ib-spine-1", "ib-spine-2"}
    why = re.search(r'<p id="workload-fabric-why">(.*?)</p>', page, re.S)
    assert why is not None and "under one leaf (leaf group 1)" in why.group(1)
