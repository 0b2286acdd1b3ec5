"""In a real browser, by clicking from the overview: Placement, the failure tab, a leaf switch
from the picker, and the rail it takes (the NIC, the GPU beside it, an eighth of each server's
bandwidth); then the top bar's search finds a switch and a NIC and opens their pages.
Screenshots (light and dark) go to test-artifacts/ (ATLAS_TEST_ARTIFACTS)."""

from __future__ import annotations

import pytest

from fabric.models import Switch
from inventory.models import Nic
from tests.placement.test_switch_failure import rail_fabric

from .conftest import ARTIFACTS, OVERFLOWS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MAC = "94:6d:ae:3c:11:0a"


def open_menu(page, entry: str) -> None:
    """Click a menu entry, unfolding the menu first where a phone folds it away."""
    toggle = page.locator(".nav-toggle")
    if toggle.is_visible():
        toggle.click()
    page.click(f"nav.layers a:text-is('{entry}')")


def both_schemes(watched, name: str) -> None:
    watched.screenshot(f"{name}-light")
    watched.page.emulate_media(color_scheme="dark")
    watched.screenshot(f"{name}-dark")
    watched.page.emulate_media(color_scheme="light")


@pytest.mark.parametrize("width", [1440, 390])
def test_a_leaf_picked_from_the_failure_tab_shows_the_rail_it_takes(signed_in_at, width):
    rail_fabric(servers=2)
    leaf = Switch.objects.get(name="leaf-su0001-r3")
    watched = signed_in_at(width)
    page = watched.page
    watched.open("/")
    open_menu(page, "Placement")
    page.wait_for_url("**/placement/")
    page.click("nav a:text-is('Failure domains')")
    page.wait_for_selector("#failure-switch")
    groups = page.locator("#failure-switch optgroup").evaluate_all("els => els.map(e => e.label)")
    assert groups == ["ib: leaves", "ib: spines"]
    page.select_option("#failure-switch", str(leaf.pk))
    page.click("#failure-form button[type=submit]")
    page.wait_for_selector("#failure-bandwidth")
    assert "If leaf ib/leaf-su0001-r3 fails" in page.inner_text("#failure-answer h2")
    words = page.inner_text("#failure-fabric-words")
    assert "takes rail 3 of 2 server(s)" in words and "12.5% of theirs" in words
    line = page.inner_text("#failure-degraded-line")
    assert "2 servers" in line and "2 GPUs lose their NIC" in line and "800 Gb/s" in line
    rows = page.locator("#failure-degraded tbody tr").all_inner_texts()
    assert len(rows) == 2
    assert all("mlx5_2" in r and "GPU 2" in r and "12.5%" in r for r in rows), rows
    assert page.evaluate(OVERFLOWS) == []
    both_schemes(watched, f"switch-failure-leaf-{width}")
    watched.assert_clean()


@pytest.mark.parametrize("width", [1440, 390])
def test_the_search_box_finds_a_switch_and_a_nic_and_opens_their_pages(signed_in_at, width):
    rail_fabric(servers=2)
    nic = Nic.objects.get(server__hostname="gpu00002", name="mlx5_1")
    Nic.objects.filter(pk=nic.pk).update(mac=MAC)
    spine = Switch.objects.get(name="spine-p001-01")
    watched = signed_in_at(width)
    page = watched.page
    watched.open("/")

    def search(query: str) -> None:
        box = page.locator("#global-search input[name=q]")
        box.fill(query)
        box.press("Enter")
        page.wait_for_url("**/search/?q=*")

    search(f"0x{spine.guid}")
    page.click(f"#search-switches a[href='/fabric/switches/{spine.pk}/']")
    page.wait_for_url(f"**/fabric/switches/{spine.pk}/")
    assert "spine-p001-01" in page.inner_text("h1")
    search(MAC.upper())
    assert page.locator("#search-nics tbody tr").count() == 1
    assert page.evaluate(OVERFLOWS) == []
    both_schemes(watched, f"search-nic-{width}")
    page.click("#search-nics a")
    page.wait_for_url(f"**/servers/{nic.server_id}/#nic-{nic.pk}")
    row = page.locator(f"#nic-{nic.pk}")
    assert row.is_visible() and "mlx5_1" in row.inner_text()
    bar = page.evaluate("document.querySelector('.topbar').getBoundingClientRect().bottom")
    box = row.bounding_box()
    assert box is not None and bar <= box["y"] < page.viewport_size["height"]  # not under the bar
    page.screenshot(path=str(ARTIFACTS / f"search-nic-row-{width}.png"))  # the window, as seen
    watched.assert_clean()
