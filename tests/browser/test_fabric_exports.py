"""The fabric page's exports and its rail grid in a real browser: from the overview to
/fabric/, "Export for Slurm" saves a topology.conf that names the Slurm cluster's own nodes
and no Kubernetes host, topology.yaml and "Labels for Kubernetes" save theirs, and a
rail-optimised fabric shows its servers x rails grid with the wrong-rail and slow cells
standing out. Screenshots at 1440 and 390 px, light and dark: test-artifacts/ (and
$ATLAS_FABRIC_SHOTS, e.g. /tmp/shots-fab)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusters.models import Cluster, Node
from fabric.findings import fabric_findings_sync
from fabric.models import Fabric
from fabric.services import fabric_rebind, fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from inventory.models import Server
from tests.reports import apply_reports, make_report

from .conftest import OVERFLOWS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NO_LEGEND_SCROLLBAR = """() => Array.from(
  document.querySelectorAll('#figure-ib .legend .scrollbar')
).every((bar) => !bar.getBBox().height)"""
SHOTS = os.environ.get("ATLAS_FABRIC_SHOTS", "")


def _rail_fabric() -> None:
    """8 servers on 8 rails (2 units of 4), gpu00002's rail-3 cable at HDR, gpu00003's NICs
    of rails 5 and 6 swapped (each on the other's leaf); servers 1-6 Slurm nodes of hpc,
    7-8 Kubernetes nodes only."""
    built = synthetic_fabric(
        servers=8, rails=8, servers_per_leaf=4, spines_per_pod=2, slow={("gpu00002", 3): "4xHDR"}
    )
    text = (
        built.text.replace('"gpu00003 mlx5_4"', "@@")
        .replace('"gpu00003 mlx5_5"', '"gpu00003 mlx5_4"')
        .replace("@@", '"gpu00003 mlx5_5"')
    )
    apply_reports(*(make_report(host, gpus=8, nics=8) for host in built.servers))
    fabric_snapshot_ingest(fabric_name="ib", raw=text)
    fabric = Fabric.objects.get()
    fabric_rebind(fabric=fabric)
    fabric_findings_sync(fabric=fabric)
    hpc = Cluster.objects.create(name="hpc", kind="slurm")
    k8s = Cluster.objects.create(name="k8s", kind="kubernetes")
    for number, host in enumerate(built.servers, start=1):
        server = Server.objects.get(hostname=host)
        if number <= 6:
            Node.objects.create(cluster=hpc, name=f"hpc{number:02d}", kind="slurm", server=server)
        else:
            Node.objects.create(cluster=k8s, name=host, kind="kubernetes", server=server)


def _shoot(watched, name: str) -> None:
    watched.screenshot(name)
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        watched.page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def _grid_text(page) -> str:
    return page.locator("#figure-ib").inner_text()


def test_export_for_slurm_from_the_overview_saves_the_cluster_s_own_nodes(signed_in, tmp_path):
    _rail_fabric()
    watched = signed_in
    watched.open("/")
    watched.page.click("#fabric-card h2 >> text=Fabrics")
    watched.page.wait_for_selector("#figure-ib .main-svg", timeout=20000)

    with watched.page.expect_download() as saved:
        watched.page.click("#fabric-ib >> text=Export for Slurm")
    download = saved.value
    assert download.suggested_filename == "ib-hpc-topology.conf"
    conf = Path(download.path()).read_text()
    assert "SwitchName=su1 Nodes=hpc[01-04]" in conf
    assert "SwitchName=su2 Nodes=hpc[05-06]" in conf
    assert "gpu00007" not in conf and "gpu00008" not in conf  # Kubernetes' alone

    with watched.page.expect_download() as saved:
        watched.page.click("#fabric-ib >> text=topology.yaml")
    assert saved.value.suggested_filename == "ib-hpc-topology.yaml"
    assert "cluster_default: true" in Path(saved.value.path()).read_text()

    with watched.page.expect_download() as saved:
        watched.page.click("#fabric-ib >> text=Labels for Kubernetes")
    assert saved.value.suggested_filename == "ib-labels.sh"
    script = Path(saved.value.path()).read_text()
    assert "kubectl label node gpu00007 " in script and "kubectl label node gpu00008 " in script
    watched.assert_clean()


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1440, 390])
def test_the_rail_grid_names_leaf_and_port_and_marks_the_odd_cells(signed_in_at, width, scheme):
    _rail_fabric()
    watched = signed_in_at(width)
    watched.page.emulate_media(color_scheme=scheme)
    watched.open("/")
    watched.page.click("#fabric-card h2 >> text=Fabrics")
    watched.page.wait_for_selector("#figure-ib .main-svg", timeout=20000)
    watched.page.wait_for_selector("#figure-ib .heatmaplayer", timeout=20000)
    drawn = _grid_text(watched.page)
    assert "rail-optimised, 8 rails" in drawn
    for label in ("gpu00001", "gpu00008", "rail 1", "rail 8", "leaf-su0001-r1 p1"):
        assert label in drawn, label
    assert "⇄ leaf-su0001-r6" in drawn  # gpu00003's rail-5 NIC on rail 6's leaf
    assert "▼ leaf-su0001-r3" in drawn  # gpu00002's HDR cable
    for meaning in ("wrong rail", "slower or narrower than its peers", "leaf of rail 8"):
        assert meaning in drawn, meaning
    legend = watched.page.locator("#figure-ib .legend").bounding_box()
    figure = watched.page.locator("#figure-ib .main-svg").first.bounding_box()
    assert legend and figure and legend["y"] + legend["height"] <= figure["y"] + figure["height"]
    assert watched.page.evaluate(NO_LEGEND_SCROLLBAR), "the legend scrolls behind a scrollbar"
    assert watched.page.evaluate(OVERFLOWS) == []
    _shoot(watched, f"fabric-rails-{width}-{scheme}")
    watched.assert_clean()
