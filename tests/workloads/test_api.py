"""The workloads API: DESIGN.md's fields exactly, each filter, allocations shown, flat queries."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.workloads.factories import fleet, workload
from workloads.models import Allocation

pytestmark = pytest.mark.django_db

FIELDS = {
    "id",
    "cluster",
    "kind",
    "scheduler_id",
    "name",
    "user",
    "account",
    "partition",
    "state",
    "submitted_at",
    "started_at",
    "ended_at",
    "node_count",
    "gpu_count",
    "gpu_models",
    "allocations",
    "locality",
}


@pytest.fixture
def two_nodes():
    return fleet(("dgx-01", "dgx-02"))


def _ids(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["scheduler_id"] for row in response.json()["results"]]


def test_a_workload_answers_with_exactly_the_design_fields(api, two_nodes):
    cluster, nodes = two_nodes
    job = workload(cluster, "5679", {nodes["dgx-01"]: range(8), nodes["dgx-02"]: range(8)})
    body = api.get(f"/api/v1/workloads/{job.pk}/").json()
    assert set(body) == FIELDS
    assert body["cluster"] == "slurm-a"
    assert (body["kind"], body["scheduler_id"], body["state"]) == ("slurm_job", "5679", "running")
    assert (body["node_count"], body["gpu_count"]) == (2, 16)
    assert [a["node"] for a in body["allocations"]] == ["dgx-01", "dgx-02"]
    first = body["allocations"][0]
    assert set(first) == {"node", "node_id", "server", "gpus"}
    assert first["node_id"] == nodes["dgx-01"].pk
    assert first["server"] == nodes["dgx-01"].server_id
    assert [g["index"] for g in first["gpus"]] == list(range(8))
    gpu = first["gpus"][3]
    assert set(gpu) == {"index", "uuid", "gpu", "mig_device"}
    held = nodes["dgx-01"].server.gpus.get(index=3)
    assert (gpu["gpu"], gpu["uuid"], gpu["mig_device"]) == (held.pk, held.uuid, None)
    assert body["locality"] == {
        "within_node": "NV18",
        "switch_hops": 2,
        "verdict": "good",
        "why": "all its GPUs on one node are joined by NVLink",
    }


def test_a_node_the_inventory_does_not_know_has_null_ids(api, two_nodes):
    cluster, _ = two_nodes
    job = workload(cluster, "77", {"gpu-elsewhere": [0, 1]})
    (entry,) = api.get(f"/api/v1/workloads/{job.pk}/").json()["allocations"]
    assert (entry["node"], entry["node_id"], entry["server"]) == ("gpu-elsewhere", None, None)
    assert entry["gpus"] == [
        {"index": 0, "uuid": None, "gpu": None, "mig_device": None},
        {"index": 1, "uuid": None, "gpu": None, "mig_device": None},
    ]


def test_mig_devices_are_named(api):
    cluster, nodes = fleet(("dgx-mig",), mig_gpus={0: ["3g.40gb", "3g.40gb"]})
    job = workload(cluster, "9", {nodes["dgx-mig"]: [0]}, mig=True)
    (gpu,) = api.get(f"/api/v1/workloads/{job.pk}/").json()["allocations"][0]["gpus"]
    device = nodes["dgx-mig"].server.gpus.get(index=0).mig_devices.order_by("id").first()
    assert (gpu["mig_device"], gpu["uuid"]) == (device.pk, device.uuid)


def test_running_shows_what_it_holds_now_and_ended_what_it_held_last(api, two_nodes):
    cluster, nodes = two_nodes
    running = workload(cluster, "1", {nodes["dgx-01"]: [0, 1]})
    # Requeued: it held GPUs 6-7 of dgx-02 before, now 0-1 of dgx-01.
    earlier = timezone.now() - timedelta(hours=3)
    Allocation.objects.create(
        workload=running, node_name="dgx-02", index=6, since=earlier, until=earlier
    )
    ended = workload(cluster, "2", {nodes["dgx-02"]: [4, 5]}, state="completed")
    Allocation.objects.create(
        workload=ended, node_name="dgx-01", index=7, since=earlier, until=earlier
    )
    by_id = {w["scheduler_id"]: w for w in api.get("/api/v1/workloads/").json()["results"]}
    assert [(a["node"], [g["index"] for g in a["gpus"]]) for a in by_id["1"]["allocations"]] == [
        ("dgx-01", [0, 1])
    ]
    assert [(a["node"], [g["index"] for g in a["gpus"]]) for a in by_id["2"]["allocations"]] == [
        ("dgx-02", [4, 5])
    ]
    assert by_id["2"]["ended_at"] is not None


def test_an_unknown_workload_is_a_404(api):
    assert api.get("/api/v1/workloads/999999/").status_code == 404


def test_reading_needs_a_sign_in(client, db):
    assert client.get("/api/v1/workloads/").status_code in (401, 403)


@pytest.fixture
def mixed(two_nodes):
    cluster, nodes = two_nodes
    other, other_nodes = fleet(("kube-01",), cluster="kube-b", kind="kubernetes")
    workload(cluster, "10", {nodes["dgx-01"]: [0, 1, 2, 3]}, user="alice", account="ml")
    workload(
        cluster,
        "11",
        {nodes["dgx-01"]: [4, 5], nodes["dgx-02"]: [0, 1]},
        user="bob",
        account="physics",
        verdict="poorly_placed",
    )
    workload(cluster, "12", {nodes["dgx-02"]: [2]}, user="carol", state="completed")
    workload(
        other,
        "team/train",
        {other_nodes["kube-01"]: [0]},
        kind="pods",
        user="",
        account="team",
        verdict="spread",
    )
    return nodes, other_nodes


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("cluster=slurm-a", ["12", "11", "10"]),
        ("cluster=kube-b", ["team/train"]),
        ("state=completed", ["12"]),
        ("user=bob", ["11"]),
        ("account=team", ["team/train"]),
        ("verdict=poorly_placed", ["11"]),
        ("verdict=spread", ["team/train"]),
        ("node=dgx-02", ["12", "11"]),
        ("held=true", ["team/train", "11", "10"]),
        ("held=false", ["12"]),
        ("gpu_model=NVIDIA H100 80GB HBM3", ["team/train", "12", "11", "10"]),
        ("gpu_model=NVIDIA A100", []),
        ("kind=pods", ["team/train"]),
    ],
)
def test_each_filter_keeps_the_workloads_it_names(api, mixed, query, expected):
    assert _ids(api.get(f"/api/v1/workloads/?{query}")) == expected


def test_server_and_gpu_filters_take_ids(api, mixed):
    nodes, _ = mixed
    server = nodes["dgx-01"].server
    assert _ids(api.get(f"/api/v1/workloads/?server={server.pk}")) == ["11", "10"]
    gpu = server.gpus.get(index=4)
    assert _ids(api.get(f"/api/v1/workloads/?gpu={gpu.pk}")) == ["11"]


@pytest.mark.parametrize("query", ["server=x", "gpu=-1", "state=sleeping", "verdict=meh"])
def test_a_bad_filter_is_a_field_level_400(api, mixed, query):
    response = api.get(f"/api/v1/workloads/?{query}")
    assert response.status_code == 400
    assert query.split("=")[0] in response.json()


LIST_QUERIES = 3
"""The count, the page of workloads (with their clusters), their allocations."""


def test_the_list_costs_the_same_queries_for_5_and_50_workloads(
    api, two_nodes, django_assert_num_queries
):
    cluster, nodes = two_nodes
    for n in range(5):
        workload(cluster, f"a{n}", {nodes["dgx-01"]: [n % 8], nodes["dgx-02"]: [n % 8]})
    with django_assert_num_queries(LIST_QUERIES):
        assert api.get("/api/v1/workloads/?page_size=100").json()["count"] == 5
    for n in range(45):
        workload(cluster, f"b{n}", {nodes["dgx-01"]: range(8), nodes["dgx-02"]: range(8)})
    with django_assert_num_queries(LIST_QUERIES):
        assert api.get("/api/v1/workloads/?page_size=100").json()["count"] == 50
