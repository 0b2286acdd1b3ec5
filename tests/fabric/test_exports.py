"""The Slurm and Kubernetes exports of a fabric as a person gets them: only the Slurm
cluster's own nodes as switch members (never a Kubernetes-only host), content negotiation
as the schema declares it (text/plain, `*/*`, YAML), a file to save with `?download=1`, the
kubectl lines as a script, and the fabric page's buttons per Slurm cluster."""

from __future__ import annotations

import json
import re

import hostlist
import pytest
import yaml
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster, Node
from fabric.services import fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from inventory.models import Server
from topology.fabric_names import kubectl_script

pytestmark = pytest.mark.django_db

CONF = "/api/v1/fabrics/f/topology.conf"
YAML = "/api/v1/fabrics/f/topology.yaml"
LABELS = "/api/v1/fabrics/f/kubernetes-labels/"


def _mixed(*, slurm: dict[str, range], kube: range = range(0)) -> list[str]:
    """A fabric of 8 servers (gpu00001..8, 2 rails, 4 a leaf); servers numbered in each
    `slurm` range are nodes of that Slurm cluster (`<cluster>-n<number>`), those in `kube`
    nodes of Kubernetes cluster k8s only. The host names."""
    built = synthetic_fabric(servers=8, rails=2, servers_per_leaf=4, spines_per_pod=1)
    servers = {
        number: Server.objects.create(identity=f"hostname:{host}", hostname=host)
        for number, host in enumerate(built.servers, start=1)
    }
    for cluster, numbers in slurm.items():
        found = Cluster.objects.create(name=cluster, kind="slurm")
        for n in numbers:
            Node.objects.create(
                cluster=found, name=f"{cluster}-n{n}", kind="slurm", server=servers[n]
            )
    if kube:
        k8s = Cluster.objects.create(name="k8s", kind="kubernetes")
        for n in kube:
            Node.objects.create(cluster=k8s, name=f"kube-{n}", kind="kubernetes", server=servers[n])
    fabric_snapshot_ingest(fabric_name="f", raw=built.text)
    return built.servers


def _members(text: str) -> set[str]:
    """Every node name a topology.conf lists under a switch."""
    found: set[str] = set()
    for line in text.splitlines():
        match = re.match(r"SwitchName=\S+ Nodes=(\S+)$", line)
        if match:
            found.update(hostlist.expand_hostlist(match[1]))
    return found


# -- whom the file lists --------------------------------------------------------------------


def test_a_slurm_cluster_s_file_lists_its_own_nodes_never_kubernetes_hosts(api):
    _mixed(slurm={"hpc": range(1, 5)}, kube=range(5, 8))  # gpu00008 no scheduler knows
    text = api.get(CONF).content.decode()
    assert _members(text) == {f"hpc-n{n}" for n in range(1, 5)}
    assert "4 host(s) on the fabric left out: not nodes of hpc" in text
    assert "gpu00005" not in text and "kube-" not in text
    named = api.get(CONF + "?cluster=hpc").content.decode()
    assert _members(named) == _members(text)
    document = yaml.safe_load(api.get(YAML).content)
    listed = {
        n
        for s in document[0]["tree"]["switches"]
        for n in hostlist.expand_hostlist(s.get("nodes", ""))
    }
    assert listed == {f"hpc-n{n}" for n in range(1, 5)}


def test_without_a_slurm_cluster_host_names_are_listed_but_no_kubernetes_host(api):
    hosts = _mixed(slurm={}, kube=range(1, 3))
    text = api.get(CONF).content.decode()
    assert _members(text) == set(hosts[2:])
    assert "2 host(s) on the fabric left out: nodes of another scheduler only" in text


def test_each_slurm_cluster_gets_its_own_nodes_and_none_named_is_a_400(api):
    _mixed(slurm={"a": range(1, 5), "b": range(5, 9)})
    assert _members(api.get(CONF + "?cluster=a").content.decode()) == {
        f"a-n{n}" for n in range(1, 5)
    }
    assert _members(api.get(CONF + "?cluster=b").content.decode()) == {
        f"b-n{n}" for n in range(5, 9)
    }
    several = api.get(CONF)
    assert several.status_code == 400 and "a, b" in several.json()["cluster"][0]


def test_a_slurm_cluster_with_no_node_on_the_fabric_is_a_409_saying_so(api):
    _mixed(slurm={"hpc": range(1, 9)}, kube=range(1, 9))
    Cluster.objects.create(name="empty", kind="slurm")
    for url in (CONF, YAML):
        answer = api.get(url + "?cluster=empty")
        assert answer.status_code == 409
        assert answer["Content-Type"] == "application/json"
        assert "no node of Slurm cluster empty" in answer.json()["detail"]
    as_text = api.get(CONF + "?cluster=empty", HTTP_ACCEPT="text/plain")
    assert as_text.status_code == 409 and as_text["Content-Type"].startswith("text/plain")
    assert "Slurm cluster empty" in json.loads(as_text.content)["detail"]


# -- content negotiation --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "accept", "answered"),
    [
        (CONF, None, "text/plain"),
        (CONF, "text/plain", "text/plain"),
        (CONF, "*/*", "text/plain"),
        (CONF, "text/plain, */*;q=0.1", "text/plain"),
        (CONF, "text/html,application/xhtml+xml,*/*;q=0.8", "text/plain"),  # a browser
        (YAML, None, "application/yaml"),
        (YAML, "*/*", "application/yaml"),
        (YAML, "application/yaml", "application/yaml"),
        (YAML, "text/yaml", "text/yaml"),
        (YAML, "application/x-yaml", "application/x-yaml"),
        (YAML, "text/plain", "text/plain"),
        (LABELS, None, "application/json"),
        (LABELS, "text/plain", "text/plain"),
    ],
)
def test_the_exports_answer_what_the_client_accepts(api, url, accept, answered):
    _mixed(slurm={"hpc": range(1, 9)}, kube=range(1, 3))
    extra = {"HTTP_ACCEPT": accept} if accept else {}
    answer = api.get(url, **extra)
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"] == f"{answered}; charset=utf-8" or (
        answered == "application/json" and answer["Content-Type"] == answered
    )
    body = answer.content.decode()
    if url == CONF:
        assert body.startswith("# Slurm topology/tree") and "SwitchName=" in body
    elif url == YAML:
        assert yaml.safe_load(body)[0]["topology"] == "f"


def test_what_nobody_can_render_is_a_406(api):
    _mixed(slurm={"hpc": range(1, 9)})
    assert api.get(CONF, HTTP_ACCEPT="image/png").status_code == 406


def test_every_media_type_the_schema_declares_is_answered(api, tmp_path):
    """What Swagger UI's "Try it out" sends: each 200 media type the schema declares."""
    path = tmp_path / "openapi.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(path))
    paths = json.loads(path.read_text())["paths"]
    _mixed(slurm={"hpc": range(1, 9)}, kube=range(1, 3))
    tried = 0
    for url in (CONF, YAML, LABELS):
        template = url.replace("/f/", "/{name}/")
        declared = paths[template]["get"]["responses"]["200"]["content"]
        assert "text/plain" in declared, template
        for media in declared:
            answer = api.get(url, HTTP_ACCEPT=media)
            assert answer.status_code == 200, (url, media)
            assert answer["Content-Type"].split(";")[0] == media
            tried += 1
    assert tried >= 5


# -- files to save ---------------------------------------------------------------------------


def test_download_names_the_file_and_asks_to_save_it(api):
    _mixed(slurm={"hpc": range(1, 9)}, kube=range(1, 3))
    cases = {
        CONF + "?download=1": 'attachment; filename="f-hpc-topology.conf"',  # the one used
        CONF + "?cluster=hpc&download=1": 'attachment; filename="f-hpc-topology.conf"',
        YAML + "?download=1": 'attachment; filename="f-hpc-topology.yaml"',
        LABELS + "?format=txt&download=1": 'attachment; filename="f-labels.sh"',
        LABELS + "?cluster=k8s&download=1": 'attachment; filename="f-k8s-labels.json"',
        CONF: 'inline; filename="f-hpc-topology.conf"',
    }
    for url, disposition in cases.items():
        answer = api.get(url)
        assert answer.status_code == 200 and answer["Content-Disposition"] == disposition, url


def test_the_labels_script_sets_what_each_kubernetes_node_lacks(api):
    _mixed(slurm={}, kube=range(1, 4))
    Node.objects.filter(name="kube-3").update(
        labels=api.get(LABELS).json()[2]["labels"]  # already labelled as suggested
    )
    script = api.get(LABELS + "?format=txt").content.decode()
    lines = script.splitlines()
    assert lines[0] == "#!/bin/sh" and "# cluster k8s" in lines
    kubectl = [line for line in lines if line.startswith("kubectl ")]
    assert [line.split()[3] for line in kubectl] == ["kube-1", "kube-2"]
    assert all(line.endswith("--overwrite") for line in kubectl)
    assert "network.topology.nvidia.com/leaf=leaf-su0001-r1" in kubectl[0]
    assert "# kube-3: labels already set" in lines


def test_the_labels_script_quotes_names_and_keeps_comments_on_one_line():
    nodes = [
        {"cluster": "evil\nrm -rf /", "node": "n\n1", "kubectl": ""},
        {"cluster": "evil\nrm -rf /", "node": "x", "kubectl": "kubectl label node 'x;y' a=b"},
    ]
    script = kubectl_script("f", nodes, "now")
    assert "# cluster evil rm -rf /" in script.splitlines()
    assert "# n 1: labels already set" in script.splitlines()
    assert not [line for line in script.splitlines() if line.startswith("rm")]
    assert "no Kubernetes node" in kubectl_script("f", [], "now")


# -- the fabric page's buttons ------------------------------------------------------------


def test_the_page_offers_one_slurm_export_per_slurm_cluster_and_the_labels(client, user):
    client.force_login(user)
    _mixed(slurm={"a": range(1, 5), "b": range(5, 9)}, kube=range(1, 3))
    text = client.get("/fabric/").content.decode()
    for cluster in ("a", "b"):
        assert f'href="{CONF}?cluster={cluster}&amp;download=1" download' in text
        assert f'href="{YAML}?cluster={cluster}&amp;download=1" download' in text
        assert f"Export for Slurm ({cluster})" in text
    assert f'href="{LABELS}?format=txt&amp;download=1"' in text and "Labels for Kubernetes" in text


def test_one_slurm_cluster_or_none_gets_one_button_and_no_kubernetes_no_labels(client, user):
    client.force_login(user)
    _mixed(slurm={"hpc": range(1, 9)})
    text = client.get("/fabric/").content.decode()
    assert f'href="{CONF}?download=1" download' in text and ">Export for Slurm</a>" in text
    assert "Labels for Kubernetes" not in text


def test_the_buttons_cost_one_query_whatever_the_fleet(client, user):
    client.force_login(user)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/fabric/").status_code == 200
        return len(captured)

    _mixed(slurm={"a": range(1, 3)})
    one = queries()
    Cluster.objects.create(name="b", kind="slurm")
    for number, server in enumerate(Server.objects.order_by("pk")[2:6], start=3):
        Node.objects.create(
            cluster_id=Cluster.objects.get(name="b").pk,
            name=f"b{number}",
            kind="slurm",
            server=server,
        )
    assert queries() == one
