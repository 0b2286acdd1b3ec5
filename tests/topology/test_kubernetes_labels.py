"""Suggested Kubernetes node labels for the switch tiers, per node: leaf, spine and core
named as the fabric names them, what each node still lacks, the kubectl line; a fixed
number of queries; bad input is a field-level 400."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster, Node
from fabric.exports import LABEL_PREFIX, host_labels
from fabric.models import Fabric
from fabric.services import fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from inventory.models import Server
from topology.fabric_names import kubernetes_node_labels

pytestmark = pytest.mark.django_db

LEAF, SPINE, CORE = (f"{LABEL_PREFIX}{tier}" for tier in ("leaf", "spine", "core"))


def three_tiers(servers: int = 8) -> Fabric:
    """Two units of 4 servers (2 rails), one pod each, 2 spines a pod, 2 cores."""
    built = synthetic_fabric(
        servers=servers, rails=2, servers_per_leaf=4, pods_of=1, spines_per_pod=2, cores=2
    )
    kube = Cluster.objects.create(name="k8s", kind="kubernetes")
    for number, host in enumerate(built.servers, start=1):
        server = Server.objects.create(identity=f"hostname:{host}", hostname=host)
        Node.objects.create(cluster=kube, name=f"node-{number}", kind="kubernetes", server=server)
    fabric_snapshot_ingest(fabric_name="ib", raw=built.text)
    return Fabric.objects.get(name="ib")


def test_host_labels_name_the_first_leaf_and_the_domains_above_it():
    switches = {
        "l1": ("leaf-a", 1, 1),
        "l2": ("leaf-b", 1, 1),
        "l3": ("leaf-c", 1, None),
        "s1": ("spine-2", 2, None),
        "s0": ("spine-1", 2, None),
    }
    links = [("l1", "s1"), ("l1", "s0"), ("l2", "s1"), ("l3", "s1")]
    labels = host_labels(switches, links, {"h1": ["l2", "l1"], "h2": ["l3"], "h3": ["s1"]})
    assert labels["h1"] == {LEAF: "leaf-a", SPINE: "spine-1"}
    assert labels["h2"] == {LEAF: "leaf-c", SPINE: "spine-1"}
    assert "h3" not in labels  # cabled to no leaf


def test_each_kubernetes_node_gets_its_leaf_spine_and_core_and_what_it_lacks(api):
    fabric = three_tiers()
    Node.objects.filter(name="node-1").update(labels={f"{LABEL_PREFIX}leaf": "leaf-su0001-r1"})
    answer = api.get("/api/v1/fabrics/ib/kubernetes-labels/")
    assert answer.status_code == 200
    nodes = {n["node"]: n for n in answer.json()}
    assert len(nodes) == 8
    first, fifth = nodes["node-1"], nodes["node-5"]
    assert first["labels"][LEAF] == "leaf-su0001-r1" and fifth["labels"][LEAF] == "leaf-su0002-r1"
    assert first["labels"][SPINE] == "spine-p001-01" and fifth["labels"][SPINE] == "spine-p002-01"
    assert {n["labels"][CORE] for n in nodes.values()} == {"core-0001"}
    assert LEAF not in first["to_set"] and set(fifth["to_set"]) == {LEAF, SPINE, CORE}
    assert first["kubectl"].startswith("kubectl label node node-1 ")
    assert first["kubectl"].endswith(" --overwrite") and f"{CORE}=core-0001" in first["kubectl"]
    assert first["server_hostname"] == "gpu00001" and first["cluster"] == "k8s"
    assert kubernetes_node_labels(fabric, "k8s") == answer.json()


def test_a_node_name_is_quoted_in_the_kubectl_line():
    fabric = three_tiers(4)
    Node.objects.filter(name="node-1").update(name="node-1;rm -rf /")
    row = next(n for n in kubernetes_node_labels(fabric) if n["server_hostname"] == "gpu00001")
    assert row["kubectl"].startswith("kubectl label node 'node-1;rm -rf /' ")


def test_the_labels_cost_four_queries_whatever_the_fabric(django_assert_num_queries):
    fabric = three_tiers(16)
    with django_assert_num_queries(4):
        assert len(kubernetes_node_labels(fabric)) == 16
    with django_assert_num_queries(5):
        kubernetes_node_labels(fabric, "k8s")


def test_a_bad_cluster_is_a_field_level_400_and_an_unknown_fabric_404(api):
    three_tiers(4)
    Cluster.objects.create(name="hpc", kind="slurm")
    for cluster in ("nope", "hpc"):
        answer = api.get(f"/api/v1/fabrics/ib/kubernetes-labels/?cluster={cluster}")
        assert answer.status_code == 400 and cluster in answer.json()["cluster"][0]
    assert api.get("/api/v1/fabrics/none/kubernetes-labels/").status_code == 404


def node_page(client, user, name: str) -> str:
    client.force_login(user)
    answer = client.get(f"/nodes/{Node.objects.get(name=name).pk}/")
    assert answer.status_code == 200
    return answer.content.decode()


def test_the_node_page_shows_its_suggested_labels_what_it_lacks_and_the_kubectl_line(client, user):
    three_tiers(8)
    Node.objects.filter(name="node-1").update(
        name="node-1<b>", labels={LEAF: "leaf-su0001-r1", SPINE: "elsewhere<i>"}
    )
    page = node_page(client, user, "node-1<b>")
    assert 'id="node-fabric-labels"' in page and "Fabric <a" in page
    assert "leaf-su0001-r1" in page and "spine-p001-01" in page and "core-0001" in page
    assert page.count(">set</span>") == 1  # the leaf; the spine has another value, core none
    assert ">other value</span>" in page and "elsewhere&lt;i&gt;" in page
    assert ">missing</span>" in page
    assert "kubectl label node &#x27;node-1&lt;b&gt;&#x27; " in page  # quoted, then escaped
    assert f"{SPINE}=spine-p001-01" in page and LEAF + "=" not in page
    assert "<b>" not in page and "<i>" not in page


def test_a_node_with_every_label_set_says_so_and_others_show_no_fabric_section(client, user):
    fabric = three_tiers(4)
    row = next(n for n in kubernetes_node_labels(fabric) if n["node"] == "node-2")
    Node.objects.filter(name="node-2").update(labels=row["labels"])
    assert "carries every suggested label" in node_page(client, user, "node-2")
    hpc = Cluster.objects.create(name="hpc", kind="slurm")
    server = Server.objects.get(hostname="gpu00001")
    Node.objects.create(cluster=hpc, name="slurm-1", kind="slurm", server=server)
    Node.objects.create(cluster=hpc, name="loose", kind="kubernetes")
    for name in ("slurm-1", "loose"):
        assert 'id="node-fabric-labels"' not in node_page(client, user, name)


def test_the_node_page_costs_the_same_queries_whatever_the_fabric(client, user):
    three_tiers(4)
    client.force_login(user)
    small = Node.objects.get(name="node-1").pk
    with CaptureQueriesContext(connection) as few:
        page = client.get(f"/nodes/{small}/")
    assert 'id="node-fabric-labels"' in page.content.decode()
    Fabric.objects.all().delete()
    Cluster.objects.all().delete()
    Server.objects.all().delete()
    three_tiers(32)
    large = Node.objects.get(name="node-1").pk
    with CaptureQueriesContext(connection) as many:
        page = client.get(f"/nodes/{large}/")
    assert 'id="node-fabric-labels"' in page.content.decode()
    assert len(many) == len(few)


def test_one_servers_labels_read_its_cables_alone_and_match_the_fabrics():
    """A node page asks for its server's labels: the same as the fabric-wide answer gives
    that server, from its own cables."""
    from fabric.selectors import fabric_server_labels

    fabric = three_tiers()
    everyone = fabric_server_labels(fabric)
    assert len(everyone) == 8
    for server_id, labels in everyone.items():
        assert fabric_server_labels(fabric, server_id) == {server_id: labels}


def test_the_server_page_suggests_the_labels_its_node_page_does_even_with_a_cable_down():
    from fabric.choices import LinkState
    from fabric.models import FabricLink
    from fabric.selectors import fabric_server_labels, server_fabric

    fabric = three_tiers()
    server_id = next(iter(fabric_server_labels(fabric)))
    cable = FabricLink.objects.filter(fabric=fabric, b_adapter__server_id=server_id).first()
    FabricLink.objects.filter(pk=cable.pk).update(state=LinkState.DOWN)
    (page,) = server_fabric(server_id)
    assert page.labels == fabric_server_labels(fabric, server_id)[server_id]
    assert page.labels[LEAF]
