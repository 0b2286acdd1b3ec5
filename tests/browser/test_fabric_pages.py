"""The fabric pages in a real browser: Fabric in the menu, the figure drawn, a switch, a
server; nothing reported by the browser. Screenshots go to test-artifacts/fabric-*.png."""

from __future__ import annotations

import pytest

from clusters.models import Cluster, Node
from fabric.findings import fabric_findings_sync
from fabric.models import Fabric
from fabric.services import fabric_rebind, fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from inventory.models import Server
from tests.reports import apply_reports, make_report

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_fabric_menu_to_a_switch_to_a_server(signed_in):
    built = synthetic_fabric(
        servers=8, rails=2, servers_per_leaf=4, slow={("gpu00002", 1): "4xHDR"}
    )
    fabric_snapshot_ingest(fabric_name="ib", raw=built.text)
    apply_reports(*(make_report(host, gpus=4, nics=1) for host in built.servers))
    fabric = Fabric.objects.get()
    fabric_rebind(fabric=fabric)
    fabric_findings_sync(fabric=fabric)

    watched = signed_in
    watched.open("/")
    watched.page.click("#menu-layers >> text=Fabric")
    watched.figure("ib")
    assert watched.page.locator("#menu-layers a[aria-current=page]").inner_text() == "Fabric"
    watched.screenshot("fabric-page")

    watched.page.click("#switches >> text=leaf-su0001-r1")
    watched.page.wait_for_selector("#switch-ports")
    assert "leaf-su0001-r1" in watched.page.inner_text("h1")
    assert "4xHDR" in watched.page.inner_text("#switch-ports")
    watched.screenshot("fabric-switch")

    watched.page.click("#switch-ports >> text=gpu00001")
    watched.page.wait_for_selector("#server-fabric-ib")
    assert "gpu00001" in watched.page.inner_text("h1")
    assert "leaf-su0001-r1" in watched.page.inner_text("#server-fabric-ib")
    watched.screenshot("fabric-server")

    kube = Cluster.objects.create(name="k8s", kind="kubernetes")
    node = Node.objects.create(
        cluster=kube,
        name="gpu00001",
        kind="kubernetes",
        server=Server.objects.get(hostname="gpu00001"),
    )
    watched.open(f"/nodes/{node.pk}/", wait_for="#node-fabric-labels")
    labels = watched.page.inner_text("#node-fabric-labels")
    assert "leaf-su0001-r1" in labels and "missing" in labels
    assert "kubectl label node gpu00001 " in labels
    watched.screenshot("fabric-node")
    watched.assert_clean()
