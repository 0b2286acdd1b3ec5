"""The fabric API: who may push, what a bad body gets (400 with the field, 413), the lists
and their filters at a constant query count, and the Slurm exports named as Slurm names."""

from __future__ import annotations

import hostlist
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster, Node
from fabric.models import Adapter, Fabric, Switch
from fabric.services import fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from inventory.models import Gpu, Server
from tests.reports import apply_reports, make_report

from .conftest import fixture_text

pytestmark = pytest.mark.django_db

SNAPSHOTS = "/api/v1/fabrics/{}/snapshots/"


def _post(client, name: str, body, **extra):
    return client.generic("POST", SNAPSHOTS.format(name), body, content_type="text/plain", **extra)


# -- pushing -------------------------------------------------------------------------------


def test_anonymous_and_readers_cannot_push(client, api, superpod):
    assert _post(client, "sp", superpod).status_code in (401, 403)
    assert _post(api, "sp", superpod).status_code == 403
    assert not Fabric.objects.exists()


def test_staff_push_creates_the_fabric(staff_api, superpod):
    response = _post(staff_api, "sp", superpod)

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["fabric"], body["format"], body["switches"], body["adapters"]) == (
        "sp",
        "ibnetdiscover",
        40,
        582,
    )
    assert body["links_up"] == 1114


def test_a_user_with_the_fabric_permission_may_push(user, treydock):
    from django.contrib.auth.models import Permission
    from rest_framework.test import APIClient

    user.user_permissions.add(Permission.objects.get(codename="change_fabric"))
    client = APIClient()
    client.force_authenticate(user)
    assert _post(client, "edr", treydock).status_code == 201


@pytest.mark.parametrize(
    ("name", "body", "field", "message"),
    [
        ("sp", b"", "body", "empty"),
        ("sp", b"\xff\xfe\x00", "body", "not UTF-8"),
        ("sp", b'{"kind": "NodeList"}', "body", "not ibnetdiscover output"),
        ("sp", b'Ca\t1 "H-0000000000000001"\t\t# "x mlx5_0"\n', "body", "no switch"),
        ("Not A Slug!", b"x", "name", "fabric name"),
    ],
)
def test_bad_bodies_get_a_field_level_400(staff_api, name, body, field, message):
    response = _post(staff_api, name, body)

    assert response.status_code in (400, 404), response.content
    if response.status_code == 400:
        assert message in response.json()["errors"][field][0]


def test_a_cut_short_snapshot_is_a_400_and_the_fabric_keeps_its_state(staff_api, superpod):
    _post(staff_api, "sp", superpod)
    response = _post(staff_api, "sp", superpod[: len(superpod) // 3])

    assert response.status_code == 400
    assert "cut short" in response.json()["errors"]["body"][0]
    fabric = staff_api.get("/api/v1/fabrics/sp/").json()
    assert fabric["last_snapshot"]["adapter_count"] == 582
    statuses = [
        s["status"] for s in staff_api.get("/api/v1/fabric-snapshots/?fabric=sp").json()["results"]
    ]
    assert statuses == ["rejected", "applied"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'Switch\t36 "S-0008f10500200001"\t\t# "le\x00af" lid 1\n', "NUL character"),
        (
            b"SW 3 99999 0x0008f10500300001 4x HDR - CA 7 1 0x506b4b0300000051 ( 'a' - 'b' )\n",
            "ports",
        ),
    ],
)
def test_a_body_no_column_can_hold_is_a_400_and_recorded_as_refused(
    staff_api, superpod, body, message
):
    """NUL characters and port numbers past 8 bits: PostgreSQL cannot keep them, so they
    are refused before any row is written, and the refusal itself is kept as text."""
    _post(staff_api, "sp", superpod)
    response = _post(staff_api, "sp", body)

    assert response.status_code == 400, response.content
    assert message in response.json()["errors"]["body"][0]
    (refused,) = staff_api.get("/api/v1/fabric-snapshots/?fabric=sp&status=rejected").json()[
        "results"
    ]
    assert message in refused["error"]
    nul = staff_api.generic(
        "PUT", "/api/v1/fabrics/sp/node-name-map/", b'0x01 "a\x00b"\n', content_type="text/plain"
    )
    assert nul.status_code == 400 and "NUL character" in nul.json()["errors"]["body"][0]


def test_a_snapshot_over_the_limit_gets_413(staff_api, settings, superpod):
    settings.ATLAS_SNAPSHOT_MAX_BYTES = 1000
    response = _post(staff_api, "sp", superpod)
    assert response.status_code == 413
    assert "1000 bytes" in response.json()["errors"]["body"][0]


# -- node-name maps --------------------------------------------------------------------------


def test_node_name_map_put_and_get(staff_api, api, superpod):
    _post(staff_api, "sp", superpod)
    url = "/api/v1/fabrics/sp/node-name-map/"
    body = '0x2c5eab0300c26540 "leaf-r4-su8"\n'

    assert api.generic("PUT", url, body, content_type="text/plain").status_code == 403
    response = staff_api.generic("PUT", url, body, content_type="text/plain")
    assert response.status_code == 200, response.content
    assert response.json()["entries"] == 1 and response.json()["renamed"] == 1
    assert api.get(url).content.decode() == body
    bad = staff_api.generic("PUT", url, "0x01 a\n0x01 b\n", content_type="text/plain")
    assert bad.status_code == 400
    assert "line 2" in bad.json()["errors"]["body"][0]
    assert api.get(url).content.decode() == body


# -- lists -----------------------------------------------------------------------------------


def test_switches_list_carries_the_design_fields_and_filters(staff_api, api, superpod):
    _post(staff_api, "sp", superpod)
    response = api.get("/api/v1/switches/?fabric=sp&tier=2&page_size=100")

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 9
    spine = body["results"][0]
    for field in ("id", "name", "guid", "tier", "port_count", "ports_used"):
        assert field in spine
    assert spine["tier"] == 2 and spine["tier_name"] == "spine"
    leaf = api.get("/api/v1/switches/?fabric=sp&search=IBLEAF-04-04").json()["results"][0]
    assert (leaf["rail"], leaf["oversubscription"]) == (4, round(17 * 400 / (16 * 400), 3))


def test_tier_override_by_staff_only(staff_api, api, superpod):
    _post(staff_api, "sp", superpod)
    spine = Switch.objects.get(name="A10-P1-IBSPINE-02")
    url = f"/api/v1/switches/{spine.pk}/"

    assert api.patch(url, {"tier_override": 3}, format="json").status_code == 403
    assert staff_api.patch(url, {"tier_override": 0}, format="json").status_code == 400
    response = staff_api.patch(url, {"tier_override": 3}, format="json")
    assert response.status_code == 200
    assert (response.json()["tier"], response.json()["tier_inferred"]) == (3, 2)


def test_fabric_links_have_both_ends_and_the_rate(staff_api, api):
    fabric_snapshot_ingest(fabric_name="f", raw=fixture_text("ibnetdiscover-router-dualport.out"))
    dgx = Server.objects.create(identity="hostname:dgx-03", hostname="dgx-03")
    from fabric.services import fabric_rebind

    fabric_rebind(fabric=Fabric.objects.get())
    response = api.get(f"/api/v1/fabric-links/?fabric=f&server={dgx.pk}")

    assert response.status_code == 200
    links = response.json()["results"]
    assert len(links) == 2
    narrow = next(link for link in links if link["width"] == "1x")
    assert narrow["speed"] == "1xHDR" and narrow["gbps"] == 50.0 and narrow["state"] == "up"
    assert narrow["a"]["kind"] == "switch" and narrow["a"]["name"] == "leaf-1"
    assert narrow["a"]["port"] == 3 and narrow["a"]["lid"] == 10
    assert narrow["b"] == {
        "kind": "adapter",
        "id": narrow["b"]["id"],
        "name": "dgx-03",
        "guid": "506b4b0300000031",
        "port": 1,
        "port_name": "",
        "lid": 25,
        "server": dgx.pk,
        "server_hostname": "dgx-03",
    }
    assert api.get("/api/v1/fabric-links/?fabric=f&speed=4xEDR").json()["count"] == 1


def test_unbound_adapters_are_listed(staff_api, api, superpod):
    _post(staff_api, "sp", superpod)
    body = api.get("/api/v1/adapters/?fabric=sp&role=host&bound=false").json()
    assert body["count"] == 582 - 40


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/fabrics/",
        "/api/v1/switches/?fabric=f",
        "/api/v1/adapters/?fabric=f",
        "/api/v1/fabric-links/?fabric=f",
        "/api/v1/fabric-snapshots/",
        "/api/v1/fabrics/f/servers/",
    ],
)
def test_lists_cost_the_same_queries_for_any_fabric_size(api, url):
    def count(servers: int) -> int:
        Fabric.objects.all().delete()
        built = synthetic_fabric(servers=servers, rails=2, servers_per_leaf=4)
        fabric_snapshot_ingest(fabric_name="f", raw=built.text)
        for host in built.servers:
            Server.objects.get_or_create(identity=f"hostname:{host}", hostname=host)
        from fabric.services import fabric_rebind

        fabric_rebind(fabric=Fabric.objects.get())
        with CaptureQueriesContext(connection) as captured:
            assert api.get(url, {"page_size": 1000}).status_code == 200
        return len(captured)

    assert count(4) == count(24)


def test_servers_bandwidth_per_gpu(staff_api, api):
    built = synthetic_fabric(servers=4, rails=4, servers_per_leaf=4)
    for host in built.servers:
        server = Server.objects.create(identity=f"hostname:{host}", hostname=host)
        for index in range(8):
            Gpu.objects.create(server=server, index=index, uuid=f"GPU-{host}-{index}")
    _post(staff_api, "f", built.text)
    rows = api.get("/api/v1/fabrics/f/servers/").json()["results"]

    assert len(rows) == 4
    assert rows[0]["nics"] == 4 and rows[0]["gbps"] == 1600.0 and rows[0]["gpus"] == 8
    assert (rows[0]["gbps_per_gpu"], rows[0]["nics_per_gpu"]) == (200.0, 0.5)
    assert len(rows[0]["leaves"]) == 4


def test_findings_of_the_superpod_name_the_swapped_cables(staff_api, api, superpod):
    _post(staff_api, "sp", superpod)
    findings = api.get("/api/v1/fabrics/sp/findings/").json()["results"]
    wrong = [f for f in findings if f["type"] == "fabric_wrong_rail"]

    assert len(wrong) == 2
    messages = sorted(f["message"] for f in wrong)
    assert "HCA-5 belongs on rail 3 but is cabled to B09-P1-IBLEAF-04-08" in messages[0]
    assert "HCA-6 belongs on rail 4 but is cabled to B09-P1-IBLEAF-03-08" in messages[1]
    assert messages[0].split()[0] == messages[1].split()[0]  # one host, two cables swapped


# -- Slurm exports (topology/ joins the fabric with clusters) -------------------------------


def _slurm_cluster_on(built, prefix: str = "n") -> tuple[Cluster, dict[str, str]]:
    cluster = Cluster.objects.create(name="hpc", kind="slurm")
    names = {}
    for number, host in enumerate(built.servers, start=1):
        server = Server.objects.create(identity=f"hostname:{host}", hostname=host)
        names[host] = f"{prefix}{number:03d}"
        Node.objects.create(cluster=cluster, name=names[host], kind="slurm", server=server)
    return cluster, names


def test_topology_conf_names_nodes_as_slurm_does(staff_api, api):
    built = synthetic_fabric(servers=8, rails=2, servers_per_leaf=4, spines_per_pod=2)
    _slurm_cluster_on(built)
    _post(staff_api, "f", built.text)
    response = api.get("/api/v1/fabrics/f/topology.conf")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == [
        "SwitchName=su1 Nodes=n[001-004]",
        "SwitchName=su2 Nodes=n[005-008]",
        "SwitchName=spine-p001-01 Switches=su[1-2]",
        "SwitchName=spine-p001-02 Switches=su[1-2]",
    ]
    assert "# su1: leaves leaf-su0001-r1, leaf-su0001-r2" in text
    assert "Slurm cluster hpc" in text


def test_topology_conf_falls_back_to_host_names_and_yaml(staff_api, api):
    built = synthetic_fabric(servers=4, rails=1, servers_per_leaf=2, spines_per_pod=1)
    _post(staff_api, "f", built.text)
    conf = api.get("/api/v1/fabrics/f/topology.conf").content.decode()
    assert "SwitchName=leaf-su0001-r1 Nodes=gpu[00001-00002]" in conf

    import yaml

    document = yaml.safe_load(api.get("/api/v1/fabrics/f/topology.yaml").content)
    assert document[0]["topology"] == "f" and document[0]["cluster_default"] is True
    switches = document[0]["tree"]["switches"]
    assert {"switch": "leaf-su0002-r1", "nodes": "gpu[00003-00004]"} in switches
    assert {"switch": "spine-p001-01", "children": "leaf-su[0001-0002]-r1"} in switches


def test_topology_conf_refuses_an_unknown_cluster(staff_api, api):
    _post(staff_api, "f", synthetic_fabric(servers=2, rails=1, servers_per_leaf=2).text)
    response = api.get("/api/v1/fabrics/f/topology.conf?cluster=nope")
    assert response.status_code == 400 and "nope" in response.json()["cluster"][0]
    assert api.get("/api/v1/fabrics/none/topology.conf").status_code == 404


def test_a_pushed_topology_conf_is_compared(staff_api, api):
    built = synthetic_fabric(servers=8, rails=2, servers_per_leaf=4, spines_per_pod=2)
    _slurm_cluster_on(built)
    _post(staff_api, "f", built.text)
    url = "/api/v1/clusters/hpc/topology/"
    good = (
        "SwitchName=s1 Nodes=n[001-004]\n"
        "SwitchName=s2 Nodes=n[005-008]\n"
        "SwitchName=top Switches=s[1-2]\n"
    )
    wrong = "SwitchName=s1 Nodes=n[001-003],n005\nSwitchName=s2 Nodes=n[006-009]\n"

    assert api.generic("POST", url, good, content_type="text/plain").status_code == 403
    agrees = staff_api.generic("POST", url, good, content_type="text/plain").json()
    assert (agrees["fabric"], agrees["agrees"], agrees["findings"]) == ("f", True, [])
    disagrees = staff_api.generic("POST", url, wrong, content_type="text/plain").json()
    subjects = {f["subject"] for f in disagrees["findings"]}
    assert not disagrees["agrees"]
    assert subjects == {
        "cluster:hpc/topology/switch:s1",
        "cluster:hpc/topology/leaf:su2",
        "cluster:hpc/topology/missing",
        "cluster:hpc/topology/unknown",
    }
    missing = next(f for f in disagrees["findings"] if f["subject"].endswith("/missing"))
    assert hostlist.expand_hostlist(missing["message"].rsplit(": ", 1)[1]) == ["n004"]
    bad = staff_api.generic("POST", url, "SwitchName=s1 Nodes=n[1-\n", content_type="text/plain")
    assert bad.status_code == 400 and "line 1" in bad.json()["body"][0]


def test_adapter_rows_stay_unique_per_fabric(staff_api, superpod):
    _post(staff_api, "a", superpod)
    _post(staff_api, "b", superpod)
    assert Adapter.objects.count() == 2 * 582


def test_servers_count_their_nics_at_pix_per_gpu(staff_api, api, django_assert_num_queries):
    built = synthetic_fabric(servers=2, rails=2, servers_per_leaf=2)
    # 4 GPUs, 2 NICs: GPU 0 and GPU 1 each share a PCIe switch with one NIC (PIX).
    apply_reports(*(make_report(host, gpus=4, nics=2) for host in built.servers))
    _post(staff_api, "f", built.text)
    rows = api.get("/api/v1/fabrics/f/servers/").json()["results"]
    assert [(r["nics_per_gpu"], r["pix_nics_per_gpu"]) for r in rows] == [(0.5, 0.5)] * 2
    from fabric.selectors import fabric_host_bandwidth

    fabric = Fabric.objects.get(name="f")
    with django_assert_num_queries(3):
        assert len(fabric_host_bandwidth(fabric)) == 2
