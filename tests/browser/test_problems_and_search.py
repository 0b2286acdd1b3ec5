"""In a real browser at 1440, 1024 and 390 px: a lost GPU shows in the servers list, the GPU
list and the CSV; the top bar's search finds a server by serial and by IP, and lists each server
once; no card's content overflows. Screenshots go to test-artifacts/<name>-<width>.png."""

from __future__ import annotations

import csv
import io

import pytest

from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from tests.nodes import scontrol_node, scontrol_text
from tests.reports import apply_reports, lost_gpu_report, make_report

from .conftest import OVERFLOWS, WIDTHS, Watched

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SERIAL = "1660223683967"


def fleet():
    reports = [make_report(f"dgx-h100-{i:02d}") for i in range(1, 4)]
    reports.append(lost_gpu_report("dgx-h100-10", serial=SERIAL))
    servers = apply_reports(*reports)
    snapshot_ingest(
        cluster_name="hpc",
        raw=scontrol_text(*(scontrol_node(r["host"]["hostname"]) for r in reports)),
    )
    reconcile_all()
    return servers


@pytest.fixture
def sized(signed_in_at):
    """A signed-in page (a viewer) at a given width."""
    return signed_in_at


def search_from_the_top_bar(watched: Watched, query: str) -> None:
    box = watched.page.locator("#global-search input[name=q]")
    assert box.is_visible()  # at phone width too: not folded away with the menu
    box.fill(query)
    box.press("Enter")
    watched.page.wait_for_url("**/search/?q=*")


def csv_of(watched: Watched, path: str) -> list[dict[str, str]]:
    response = watched.page.request.get(watched.base + path)
    assert response.ok
    return list(csv.DictReader(io.StringIO(response.text())))


@pytest.mark.parametrize("width", WIDTHS)
def test_a_lost_gpu_shows_in_the_servers_list_the_gpu_list_and_the_csv(sized, width):
    servers = fleet()
    watched = sized(width)
    watched.open("/servers/", wait_for="#servers")
    row = watched.page.locator("#servers tbody tr", has_text="dgx-h100-10")
    assert row.locator('.badge[data-state="critical"]').count() >= 1
    assert row.locator('.badge[data-state="lost"]').inner_text() == "1"
    assert watched.page.evaluate(OVERFLOWS) == []
    watched.screenshot(f"servers-lost-gpu-{width}")

    watched.open("/gpus/?status=lost", wait_for="#gpus")
    lost = watched.page.locator("#gpus tbody tr")
    assert lost.count() == 1
    text = lost.inner_text()
    assert "dgx-h100-10" in text and "0000:68:00.0" in text and "lost" in text
    assert watched.page.evaluate(OVERFLOWS) == []
    watched.screenshot(f"gpus-lost-{width}")

    (gpu,) = csv_of(watched, "/gpus/?status=lost&format=csv")
    assert (gpu["Server"], gpu["Index"], gpu["PCI bus"]) == ("dgx-h100-10", "5", "0000:68:00.0")
    rows = {r["Hostname"]: r for r in csv_of(watched, "/servers/?format=csv")}
    assert rows["dgx-h100-10"]["Lost GPUs"] == "1" and rows["dgx-h100-10"]["Health"] == "critical"

    watched.open("/nodes/", wait_for="#nodes")
    node = watched.page.locator("#nodes tbody tr", has_text="dgx-h100-10")
    assert node.locator('.badge[data-state="critical"]').count() >= 1
    assert servers["dgx-h100-10"].pk
    watched.assert_clean()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_top_bar_search_finds_a_server_by_serial_and_by_ip_and_lists_it_once(sized, width):
    servers = fleet()
    target = servers["dgx-h100-10"]
    watched = sized(width)
    watched.open("/")
    search_from_the_top_bar(watched, SERIAL)
    link = watched.page.locator("#search-servers a", has_text="dgx-h100-10")
    assert link.count() == 1
    assert watched.page.evaluate(OVERFLOWS) == []
    watched.screenshot(f"search-serial-{width}")

    search_from_the_top_bar(watched, target.addresses[0].split("/")[0])
    watched.page.locator("#search-servers a", has_text="dgx-h100-10").click()
    watched.page.wait_for_url(f"**/servers/{target.pk}/")

    search_from_the_top_bar(watched, "dgx")
    names = watched.page.locator("#search-servers tbody tr td:first-child a").all_inner_texts()
    assert sorted(names) == sorted(servers) and len(names) == len(set(names))
    assert watched.page.evaluate(OVERFLOWS) == []
    watched.screenshot(f"search-dgx-{width}")
    watched.assert_clean()
