"""One answer on every page (issue 23, item 1): on the demo fleet, a person who clicks from the
overview to Health and to GPUs sees the same GPUs needing action, each with the same reason:
the GPU that fell off the bus, the GPUs of servers with a critical finding, the GPUs with an
open health finding. Screenshots go to test-artifacts/needs-action-*.png."""

from __future__ import annotations

import pytest

from demo.services import demo_load
from health.selectors import gpus_needing_action

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROWS = """(id) => {
  const table = document.getElementById(id);
  const heads = [...table.querySelectorAll('thead th')]
    .map(th => th.textContent.trim().replace(/[^A-Za-z)]+$/, ''));  // no sort arrow
  return [...table.querySelectorAll('tbody tr')].map(tr => {
    const cells = [...tr.querySelectorAll('td')].map(td => td.textContent.trim());
    return Object.fromEntries(heads.map((h, i) => [h, cells[i]]));
  });
}"""


def test_the_overview_health_and_gpus_pages_name_the_same_gpus_and_reasons(signed_in_at):
    demo_load()
    expected = {(r.name, r.words) for r in gpus_needing_action()}
    assert ("dgx-h100-10 GPU 5 (lost)", "lost: fell off the bus") in expected
    assert ("dgx-h100-08 GPU 1", "open health finding: Fatal Xid 74") in expected
    watched = signed_in_at(1440)
    page = watched.page
    watched.open("/")

    card = page.inner_text("#overview-health")
    assert f"{len(expected)} GPUs need action" in card
    for _name, words in expected:
        assert words in card
    watched.screenshot("needs-action-overview-1440")

    page.click("#overview-health p a[href='/health/'] >> nth=0")
    page.wait_for_url(watched.base + "/health/")
    shown = {(r["GPU"], r["Reason"]) for r in page.evaluate(ROWS, "gpus-needing-action")}
    assert shown == expected
    watched.screenshot("needs-action-health-1440")

    page.click("#menu-layers >> text=Overview")
    page.wait_for_url(watched.base + "/")
    page.click("#menu-layers >> text=GPUs")
    page.wait_for_url(watched.base + "/gpus/")
    summary = page.inner_text("#gpus-needing-action-summary")
    assert f"{len(expected)} GPUs need action" in summary
    page.click("#gpus-needing-action-summary a[href='?action=needed']")
    page.wait_for_url(watched.base + "/gpus/?action=needed")
    listed = {
        (
            f"{r['Server']} GPU {r['Index']}" + (" (lost)" if r["Status"] == "lost" else ""),
            r["Needs action"],
        )
        for r in page.evaluate(ROWS, "gpus")
    }
    assert listed == expected
    watched.screenshot("needs-action-gpus-1440")

    # the GPU that fell off the bus: its page tells the Xid 79
    page.click("#gpus a >> text=lost: fell off the bus")
    page.wait_for_selector("#events")
    assert "Xid 79" in page.inner_text("#events")
    watched.assert_clean()
