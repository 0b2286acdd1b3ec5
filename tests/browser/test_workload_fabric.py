"""In a real browser, by clicking as a person would: from the dashboard's menu to the
workloads, to the demo's 2 × 8 training job, whose servers are drawn on the fabric under
their rail leaves, with the hops in words under the figure."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from .conftest import ARTIFACTS, OVERFLOWS, Watched

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_demos_training_job_is_drawn_on_the_fabric(signed_in):
    call_command("demo")
    watched: Watched = signed_in
    page = watched.page

    watched.open("/")
    page.locator("#menu-layers a", has_text="Workloads").click()
    page.wait_for_url("**/workloads/")
    page.locator("#workloads tbody a", has_text="ml/llm-train").first.click()
    page.wait_for_url(re.compile(r".*/workloads/\d+/$"))

    watched.figure("workload-fabric")
    drawn = page.locator("#workload-fabric #figure-workload-fabric")
    assert drawn.locator("svg.main-svg").count() > 0
    assert drawn.locator(".scatterlayer .trace").count() > 0
    title = drawn.locator(".gtitle").text_content() or ""
    assert "2 servers under one leaf: ib-leaf-r1…r8 (8 rails)" in title
    assert "dgx-h100-01: 8 GPUs" in (drawn.text_content() or "")
    assert "under one leaf" in page.inner_text("#workload-fabric-why")
    assert page.evaluate(OVERFLOWS) == []
    page.locator("#workload-fabric").screenshot(path=str(ARTIFACTS / "workload-fabric.png"))
    watched.assert_clean()
