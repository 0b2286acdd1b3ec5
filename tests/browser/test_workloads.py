"""In a real browser: from the dashboard's menu to the workloads, filtered by user, to one
workload's GPUs, to its server, whose GPU row says who holds it: by clicking, as a person
would. The workload page's interconnect figure draws, and no page errs or runs a job name."""

from __future__ import annotations

import re

import pytest

from tests.workloads.factories import fleet, workload

from .conftest import Watched

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

XSS = "<script>alert(1)</script>"


def test_from_the_menu_to_a_workloads_server_and_who_holds_its_gpus(signed_in, live_server):
    cluster, nodes = fleet(("dgx-01", "dgx-02"))
    workload(cluster, "5679", {nodes["dgx-01"]: [0, 1, 2, 3]}, user="alice", name=XSS)
    workload(cluster, "5680", {nodes["dgx-02"]: range(8)}, user="bob")
    watched: Watched = signed_in
    page = watched.page

    watched.open("/")
    page.locator("#menu-layers a", has_text="Workloads").click()
    page.wait_for_url("**/workloads/")
    assert page.locator("#workloads tbody tr").count() == 2

    page.fill('form.filters input[name="user"]', "alice")
    page.locator("form.filters button[type=submit]").click()
    page.wait_for_url(re.compile(r".*/workloads/\?.*user=alice.*"))
    rows = page.locator("#workloads tbody tr")
    assert rows.count() == 1
    assert "1 node × 4 GPUs = 4" in rows.first.inner_text()

    rows.first.locator("a", has_text="5679").click()
    page.wait_for_url(re.compile(r".*/workloads/\d+/$"))
    gpus = page.locator("#workload-gpus tbody tr")
    assert gpus.count() == 4
    assert "GPU 3" in gpus.nth(3).inner_text()
    assert XSS in page.locator("h1 + p").inner_text()  # shown as text, never run
    watched.figure(f"interconnect-{nodes['dgx-01'].server_id}")

    gpus.first.locator("a.server-link").click()
    page.wait_for_url(f"**/servers/{nodes['dgx-01'].server_id}/")
    first = page.locator("#gpu-table tbody tr").first
    assert "held by job 5679 of alice" in first.locator("td.workload").inner_text()
    assert "held by" not in page.locator("#gpu-table tbody tr").nth(4).inner_text()
    watched.assert_clean()
