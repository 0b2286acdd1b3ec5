"""In a real browser: from the overview to a server with a problem, whose header says how bad
it is and whose findings come before its hardware; a GPU row leads to its GPU page, a copy
button puts the drain command on the clipboard, and the runbook's heading a finding links to
stops below the sticky top bar. At 1440 and 390 px, light and dark, nothing overflows.
Screenshots go to test-artifacts/server-page-<width>-<scheme>.png."""

from __future__ import annotations

import shlex

import pytest

from inventory.choices import GpuStatus
from inventory.models import Gpu
from tests.topology.server_fleet import server_with_a_lost_gpu

from .conftest import OVERFLOWS, Watched

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOST = "dgx-h100-10"


def to_the_server_from_the_overview(watched: Watched) -> None:
    watched.open("/")
    changes = watched.page.locator("section.card", has_text="Recent hardware changes")
    changes.locator("a", has_text=HOST).first.click()
    watched.page.wait_for_url("**/servers/*/")
    assert watched.page.locator("h1").inner_text().startswith(HOST)


def top(watched: Watched, selector: str) -> float:
    box = watched.page.locator(selector).first.bounding_box()
    assert box is not None, selector
    return box["y"]


def test_a_server_with_a_problem_shows_it_first_and_leads_to_its_gpu_and_commands(
    signed_in, live_server
):
    server_with_a_lost_gpu()
    lost = Gpu.objects.get(server__hostname=HOST, status=GpuStatus.LOST)
    watched = signed_in
    watched.page.context.grant_permissions(
        ["clipboard-read", "clipboard-write"], origin=live_server.url
    )
    to_the_server_from_the_overview(watched)
    page = watched.page
    badge = page.locator('#server-health-badge .badge[data-state="critical"]')
    assert badge.is_visible()
    assert "1 GPU lost" in page.locator("#server-health").inner_text()
    findings = top(watched, "#server-findings")
    assert findings < 900  # on the first screen, under the header
    assert findings < top(watched, "#gpu-table") < top(watched, "#nic-table")
    assert page.locator("#server-findings tr").first.get_attribute("class") == "sev-critical"

    drain = page.locator('#commands li[data-command="drain"]')
    text = drain.locator("code").inner_text()
    drain.locator("button.copy").click()
    page.wait_for_function(
        "() => document.querySelector('#commands li[data-command=\"drain\"] button')"
        ".textContent === 'Copied'",
        timeout=5000,
    )
    assert page.evaluate("() => navigator.clipboard.readText()") == text
    words = shlex.split(text)
    assert words[:4] == ["scontrol", "update", f"nodename={HOST}", "state=drain"]
    assert words[4].startswith("reason=atlas: ") and len(words) == 5
    assert "Copied" in page.locator("#commands .copy-status").inner_text()

    page.locator("#gpu-table a", has_text="5 (lost)").click()
    page.wait_for_url(f"**/gpus/{lost.pk}/")
    assert lost.serial in page.locator("main").inner_text()
    watched.assert_clean()


def test_the_runbook_heading_a_finding_links_to_is_not_under_the_top_bar(signed_in):
    server_with_a_lost_gpu()
    watched = signed_in
    to_the_server_from_the_overview(watched)
    watched.page.locator("#server-findings a", has_text="GPU on the PCI bus").click()
    watched.page.wait_for_url("**/findings/*/")
    watched.page.click("#runbook-link")
    watched.page.wait_for_url("**/docs/findings/#gpu_not_in_nvml")
    watched.page.wait_for_timeout(300)
    heading = watched.page.locator("#gpu_not_in_nvml").bounding_box()
    bar = watched.page.locator("#topbar").bounding_box()
    assert heading is not None and bar is not None
    assert heading["y"] >= bar["y"] + bar["height"], (heading, bar)
    watched.assert_clean()


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1440, 390])
def test_the_server_page_fits_at_each_width_and_scheme(signed_in_at, width, scheme):
    server_with_a_lost_gpu()
    watched = signed_in_at(width)
    watched.page.emulate_media(color_scheme=scheme)
    to_the_server_from_the_overview(watched)
    watched.page.wait_for_selector("#commands")
    assert watched.page.evaluate(OVERFLOWS) == []
    watched.screenshot(f"server-page-{width}-{scheme}")
    first = watched.page.locator("#server-findings").bounding_box()
    assert first is not None and first["y"] < 900
    watched.assert_clean()
