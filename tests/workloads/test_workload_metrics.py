"""`/metrics` counts running workloads, the GPUs they hold per account and the GPUs
stranded on partly used nodes (issue 24, 5), with bounded label cardinality."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.models import Cluster, Node
from integrations.selectors import OTHER, capped, gpus_held
from tests.integrations.metrics_text import families, samples
from tests.workloads.factories_joins import hold, server_with_gpus, workload
from workloads.fragments import stranded_gpus, stranded_on_node
from workloads.models import Allocation

pytestmark = pytest.mark.django_db


@pytest.fixture
def metrics_on(settings) -> str:
    settings.ATLAS_METRICS_TOKEN = "metrics-token-0123456789"
    return settings.ATLAS_METRICS_TOKEN


def scrape(client, token: str) -> str:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    return response.content.decode()


def node_on(server, cluster: str, *, capacity: int = 8, **fields) -> Node:
    found, _ = Cluster.objects.get_or_create(name=cluster, defaults={"kind": "slurm"})
    return Node.objects.create(
        cluster=found,
        name=server.hostname,
        kind=found.kind,
        server=server,
        gpu_capacity=capacity,
        **{"ready": True, "schedulable": True, **fields},
    )


def test_the_stranding_rule():
    assert [stranded_on_node(8, h) for h in (0, 3, 8, 9)] == [0, 5, 0, 0]
    assert stranded_gpus([(8, 4), (8, 2), (8, 0), (8, 8)]) == 10
    assert stranded_gpus([]) == 0


def fleet():
    """hpc: a 16-GPU job on two full nodes, a 4-GPU and a 2-GPU job sharing a third (2
    stranded), an idle node (none stranded); prod: pods holding 1 of 8 (7 stranded)."""
    servers = {h: server_with_gpus(h) for h in ("dgx-01", "dgx-02", "dgx-03", "dgx-04", "k-01")}
    nodes = {h: node_on(s, "prod" if h == "k-01" else "hpc") for h, s in servers.items()}
    big = workload("100", user="alice")
    hold(big, servers["dgx-01"], range(8))
    hold(big, servers["dgx-02"], range(8))
    hold(workload("101", user="bob"), servers["dgx-03"], range(4))
    hold(workload("102", user="bob"), servers["dgx-03"], [4, 5])
    pods = workload("ml/trainer", kind="pods", cluster="prod", user="", account="ml")
    hold(pods, servers["k-01"], [0])
    ended = workload("99", user="carol", state="completed")
    hold(ended, servers["dgx-04"], range(8), until=timezone.now() - timedelta(minutes=1))
    workload("103", user="dave", state="pending")
    for h, node in nodes.items():
        Allocation.objects.filter(server=servers[h]).update(node=node)
    return servers, nodes


def test_the_families_and_their_values(client, metrics_on):
    fleet()
    text = scrape(client, metrics_on)
    found = families(text)
    for name in ("atlas_workloads_running", "atlas_gpus_held", "atlas_gpus_stranded"):
        assert found[name].type == "gauge", name
    assert samples(text, "atlas_workloads_running", "cluster", "kind") == {
        ("hpc", "slurm_job"): 3.0,
        ("prod", "pods"): 1.0,
    }
    assert samples(text, "atlas_gpus_held", "cluster", "account") == {
        ("hpc", "alice"): 16.0,
        ("hpc", "bob"): 6.0,
        ("prod", "ml"): 1.0,
    }
    assert samples(text, "atlas_gpus_stranded", "cluster") == {("hpc",): 2.0, ("prod",): 7.0}


def test_a_scheduler_count_without_allocations_strands_too(client, metrics_on):
    server = server_with_gpus("k-02")
    node_on(server, "prod", gpu_used=3)
    drained = server_with_gpus("k-03")
    node_on(drained, "prod", gpu_used=3, schedulable=False)  # its free GPUs are not free
    text = scrape(client, metrics_on)
    assert samples(text, "atlas_gpus_stranded", "cluster") == {("prod",): 5.0}


def test_accounts_past_the_cap_are_summed_as_other():
    counts = {("hpc", f"u{i}"): i + 1 for i in range(5)} | {("prod", "ns"): 1}
    assert capped(counts, 2) == {
        ("hpc", "u4"): 5,
        ("hpc", "u3"): 4,
        ("hpc", OTHER): 6,
        ("prod", OTHER): 1,
    }
    server = server_with_gpus("dgx-01")
    for i in range(3):
        hold(workload(str(i), user=f"user{i}"), server, [i])
    assert gpus_held(limit=1) == {("hpc", "user0"): 1, ("hpc", OTHER): 2}


def test_the_workload_families_cost_three_queries_however_many(client, metrics_on):
    def cost() -> int:
        with CaptureQueriesContext(connection) as ctx:
            scrape(client, metrics_on)
        return len(ctx)

    server = server_with_gpus("dgx-01")
    node_on(server, "hpc")
    hold(workload("1"), server, [0])
    few = cost()
    for i in range(2, 8):
        s = server_with_gpus(f"dgx-{i:02}")
        node_on(s, "hpc")
        hold(workload(str(i), user=f"u{i}"), s, range(i % 8))
    assert cost() == few
