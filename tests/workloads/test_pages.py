"""The workloads pages, and what the server, node, GPU and overview pages say of workloads."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.workloads.factories import fleet, workload
from workloads.models import Allocation

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def demo_like():
    """As the demo seeds them: a 2 × 8 job, a 4-GPU and a 2-GPU job sharing one server, one
    poorly placed, one ended, a MIG pod."""
    cluster, nodes = fleet(("dgx-01", "dgx-02", "dgx-03"))
    kube, kube_nodes = fleet(
        ("kube-01",), cluster="kube-b", kind="kubernetes", mig_gpus={0: ["3g.40gb", "3g.40gb"]}
    )
    big = workload(
        cluster,
        "5679",
        {nodes["dgx-01"]: range(8), nodes["dgx-02"]: range(8)},
        user="alice",
        name="llm-pretrain",
        locality={
            "within_node": "NV18",
            "switch_hops": 1,
            "verdict": "good",
            "why": "both nodes under leaf-1; NVLink between all GPUs of each",
        },
    )
    four = workload(cluster, "5680", {nodes["dgx-03"]: [0, 1, 2, 3]}, user="bob")
    two = workload(
        cluster,
        "5681",
        {nodes["dgx-03"]: [4, 6]},
        user="carol",
        verdict="poorly_placed",
        locality={
            "within_node": "SYS",
            "switch_hops": 0,
            "verdict": "poorly_placed",
            "why": "its two GPUs sit on different sockets though two NVLink peers were free",
            "better": ["dgx-03"],
        },
    )
    ended = workload(
        cluster,
        "5600",
        {nodes["dgx-03"]: [7]},
        user="dave",
        state="completed",
        ended_at=timezone.now() - timedelta(minutes=30),
    )
    pod = workload(
        kube,
        "team/infer",
        {kube_nodes["kube-01"]: [0]},
        kind="pods",
        user="",
        account="team",
        mig=True,
    )
    return {
        "nodes": {**nodes, **kube_nodes},
        "big": big,
        "four": four,
        "two": two,
        "ended": ended,
        "pod": pod,
    }


def _text(response) -> str:
    assert response.status_code == 200
    return response.content.decode()


def _csv(client, path: str) -> list[dict[str, str]]:
    response = client.get(path)
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_the_list_shows_shape_model_locality_and_links_each_workload(signed_in, demo_like):
    page = _text(signed_in.get("/workloads/"))
    assert "2 nodes × 8 GPUs = 16" in page
    assert "1 node × 4 GPUs = 4" in page
    assert "1 node × 1 GPU = 1" in page
    assert f'href="/workloads/{demo_like["big"].pk}/"' in page
    assert "NVLink within each node, 1 switch between nodes (one leaf)" in page
    assert "across sockets within the node" in page
    assert 'data-state="poorly_placed"' in page


def test_uneven_shapes_are_written_as_nodes_and_gpus(signed_in):
    cluster, nodes = fleet(("dgx-01", "dgx-02"))
    workload(cluster, "7", {nodes["dgx-01"]: range(8), nodes["dgx-02"]: [0, 1]})
    assert "2 nodes, 10 GPUs" in _text(signed_in.get("/workloads/"))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("user=bob", ["5680"]),
        ("account=team", ["team/infer"]),
        ("cluster=kube-b", ["team/infer"]),
        ("state=completed", ["5600"]),
        ("verdict=poorly_placed", ["5681"]),
        ("gpu_model=NVIDIA+H100+80GB+HBM3", ["team/infer", "5600", "5681", "5680", "5679"]),
    ],
)
def test_the_page_filters_as_the_api_does(signed_in, demo_like, query, expected):
    rows = _csv(signed_in, f"/workloads/?{query}&format=csv&sort=-id")
    assert [r["ID"] for r in rows] == expected


def test_the_filter_form_offers_clusters_models_states_and_verdicts(signed_in, demo_like):
    page = _text(signed_in.get("/workloads/"))
    for name in ("cluster", "user", "account", "state", "gpu_model", "verdict"):
        assert f'name="{name}"' in page
    assert '<option value="kube-b">' in page
    assert '<option value="NVIDIA H100 80GB HBM3">' in page
    assert '<option value="poorly_placed">' in page


def test_the_csv_has_the_pages_columns(signed_in, demo_like):
    rows = {r["ID"]: r for r in _csv(signed_in, "/workloads/?format=csv")}
    big = rows["5679"]
    assert big["Shape"] == "2 nodes × 8 GPUs = 16"
    assert big["User"] == "alice"
    assert big["Locality"] == "NVLink within each node, 1 switch between nodes (one leaf); good"
    assert big["State"] == "running"
    assert big["Started"].startswith(str(demo_like["big"].started_at.year))
    assert list(big) == [
        "ID",
        "Cluster",
        "Name",
        "User",
        "Account",
        "Shape",
        "Model",
        "Locality",
        "State",
        "Started",
    ]


def test_the_menu_names_workloads(signed_in, demo_like):
    page = _text(signed_in.get("/workloads/"))
    assert re.search(r'<a href="/workloads/" aria-current="page">Workloads</a>', page)


def _page_queries(client, path: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(path).status_code == 200
    return len(ctx.captured_queries)


def test_the_list_page_costs_the_same_queries_for_5_and_50_workloads(signed_in):
    cluster, nodes = fleet(("dgx-01", "dgx-02"))
    for n in range(5):
        workload(cluster, f"a{n}", {nodes["dgx-01"]: [n]})
    few = _page_queries(signed_in, "/workloads/?page_size=100")
    for n in range(45):
        workload(cluster, f"b{n}", {nodes["dgx-01"]: range(8), nodes["dgx-02"]: range(8)})
    assert _page_queries(signed_in, "/workloads/?page_size=100") == few


def test_the_workload_page_shows_its_gpus_per_node_and_their_links(signed_in, demo_like):
    big = demo_like["big"]
    server = demo_like["nodes"]["dgx-01"].server
    gpu3 = server.gpus.get(index=3)
    page = _text(signed_in.get(f"/workloads/{big.pk}/"))
    assert "llm-pretrain" in page
    assert "2 nodes × 8 GPUs = 16" in page
    assert f'href="/servers/{server.pk}/"' in page
    assert f'href="/gpus/{gpu3.pk}/"' in page
    assert gpu3.uuid in page
    assert "both nodes under leaf-1" in page
    assert "1 switch between nodes (one leaf)" in page
    assert f'href="/nodes/{demo_like["nodes"]["dgx-02"].pk}/"' in page


def test_the_workload_page_draws_its_gpus_on_each_servers_interconnect(signed_in, demo_like):
    page = _text(signed_in.get(f"/workloads/{demo_like['two'].pk}/"))
    server = demo_like["nodes"]["dgx-03"].server
    element = f"figure-interconnect-{server.pk}-data"
    blob = re.search(rf'<script id="{element}" type="application/json">(.*?)</script>', page, re.S)
    assert blob is not None
    figure = json.loads(blob.group(1))
    assert "held by this workload" in [t.get("name") for t in figure["data"]]
    outlined = {(s["x0"] + 0.5, s["y0"] + 0.5) for s in figure["layout"]["shapes"]}
    assert outlined == {(4, 6), (6, 4)}  # GPUs 4 and 6, the pair between them
    assert "dgx-03" in page and "Could have been" in page


def test_a_mig_pod_names_its_mig_device(signed_in, demo_like):
    page = _text(signed_in.get(f"/workloads/{demo_like['pod'].pk}/"))
    assert "3g.40gb" in page


def test_an_unknown_workload_is_a_404(signed_in, db):
    assert signed_in.get("/workloads/424242/").status_code == 404


def test_the_workload_page_costs_the_same_queries_for_one_or_three_servers(signed_in):
    cluster, nodes = fleet(("dgx-01", "dgx-02", "dgx-03"))
    small = workload(cluster, "1", {nodes["dgx-01"]: [0, 1]})
    large = workload(cluster, "2", {n: range(8) for n in nodes.values()})
    assert _page_queries(signed_in, f"/workloads/{small.pk}/") == _page_queries(
        signed_in, f"/workloads/{large.pk}/"
    )


def test_the_server_page_says_who_holds_each_gpu_and_what_ended_there(signed_in, demo_like):
    server = demo_like["nodes"]["dgx-03"].server
    page = _text(signed_in.get(f"/servers/{server.pk}/"))
    row = re.search(r'<table class="data" id="gpu-table">.*?</table>', page, re.S).group(0)
    rows = re.findall(r"<tr.*?</tr>", row, re.S)[1:]
    assert "held by" in rows[0] and "job 5680 of bob</a>" in rows[0]
    assert f'href="/workloads/{demo_like["four"].pk}/"' in rows[0]
    assert "job 5681 of carol</a>" in rows[4] and "job 5681" in rows[6]
    assert "held by" not in rows[5]
    recent = re.search(r'id="recent-workloads".*?</section>', page, re.S).group(0)
    assert "5600" in recent and "dave" in recent and "5680" not in recent


def test_the_server_page_names_mig_holders(signed_in, demo_like):
    server = demo_like["nodes"]["kube-01"].server
    page = _text(signed_in.get(f"/servers/{server.pk}/"))
    mig = re.search(r'id="mig-table".*?</table>', page, re.S).group(0)
    held, free = re.findall(r"<tr><td>GPU0.*?</tr>", mig, re.S)
    assert "pods team/infer" in held and "held by" not in free


def test_the_server_page_costs_the_same_queries_for_few_and_many_workloads(signed_in):
    cluster, nodes = fleet(("dgx-01",))
    node = nodes["dgx-01"]
    workload(cluster, "1", {node: [0]})
    path = f"/servers/{node.server_id}/"
    few = _page_queries(signed_in, path)
    for n in range(1, 8):
        workload(cluster, f"h{n}", {node: [n]})
    for n in range(20):
        workload(cluster, f"e{n}", {node: range(8)}, state="completed")
    assert _page_queries(signed_in, path) == few


def test_the_node_page_says_who_holds_each_gpu(signed_in, demo_like):
    node = demo_like["nodes"]["dgx-03"]
    page = _text(signed_in.get(f"/nodes/{node.pk}/"))
    table = re.search(r'id="node-gpu-table".*?</table>', page, re.S).group(0)
    assert "job 5680 of bob</a>" in table
    recent = re.search(r'id="recent-workloads".*?</section>', page, re.S).group(0)
    assert "5600" in recent


def test_the_gpu_page_says_who_holds_it_and_keeps_past_workloads_by_serial(signed_in, demo_like):
    cluster = demo_like["big"].cluster
    gpu = demo_like["nodes"]["dgx-01"].server.gpus.get(index=2)
    # Before it moved into dgx-01, the same board (same serial) ran job 4000 elsewhere.
    old = workload(cluster, "4000", {"old-node": []}, user="erin", state="failed")
    earlier = timezone.now() - timedelta(days=2)
    Allocation.objects.create(
        workload=old,
        node_name="old-node",
        index=5,
        gpu_serial=gpu.serial,
        since=earlier,
        until=earlier + timedelta(hours=1),
    )
    page = _text(signed_in.get(f"/gpus/{gpu.pk}/"))
    held = re.search(r'id="gpu-held-by".*?</section>', page, re.S).group(0)
    assert "job 5679 of alice</a>" in held
    recent = re.search(r'id="recent-workloads".*?</section>', page, re.S).group(0)
    assert "4000" in recent and "erin" in recent


def test_the_overview_counts_workloads_and_links_the_filtered_list(signed_in, demo_like):
    page = _text(signed_in.get("/"))
    card = re.search(r'id="overview-workloads".*?</section>', page, re.S).group(0)
    assert re.search(r'href="/workloads/\?state=running">4</a>', card)
    assert re.search(r'href="/workloads/\?held=true">23</a>', card)
    assert 'href="/workloads/?state=running&amp;verdict=poorly_placed"' in card
    assert re.search(r'data-state="poorly_placed">1</span>', card)


def test_scheduler_supplied_text_is_escaped_everywhere(signed_in):
    cluster, nodes = fleet(("dgx-01",))
    job = workload(
        cluster,
        XSS,
        {nodes["dgx-01"]: [0, 1]},
        name=XSS,
        user=XSS,
        account=XSS,
        locality={"within_node": XSS, "switch_hops": 0, "verdict": "good", "why": XSS},
    )
    workload(cluster, "e1", {nodes["dgx-01"]: [2]}, name=XSS, user=XSS, state="failed")
    gpu = nodes["dgx-01"].server.gpus.get(index=0)
    for path in (
        "/workloads/",
        f"/workloads/{job.pk}/",
        f"/servers/{nodes['dgx-01'].server_id}/",
        f"/nodes/{nodes['dgx-01'].pk}/",
        f"/gpus/{gpu.pk}/",
    ):
        page = _text(signed_in.get(path))
        assert XSS not in page, path
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in _text(signed_in.get("/workloads/"))
