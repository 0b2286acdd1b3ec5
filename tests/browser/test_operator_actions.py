"""Acting where one reads (issue 15 §2, §3, §5), at 1440, 1024 and 390 px: a finding clicked on
the overview, acknowledged on its page and the acknowledgement taken back; a node bound to a
server through the picker; the demo's 3-GPU Slurm placement keeping to one GPU model or saying
it mixes, and a pod request over every cluster considering Kubernetes only. Screenshots go to
test-artifacts/."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from clusters.models import Node
from findings.models import Finding

from .conftest import OVERFLOWS, WIDTHS
from .test_responsive import fleet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def staff_at(signed_in_at):
    """A signed-in page (staff) at a given width."""
    return lambda width: signed_in_at(width, staff=True)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_finding_clicked_on_the_overview_is_acknowledged_on_its_page(staff_at, width):
    fleet()
    watched = staff_at(width)
    watched.open("/")
    first = watched.page.locator("main a[href^='/findings/'][href$='/']").first
    first.click()
    watched.page.wait_for_selector("#finding-actions")
    assert (
        watched.page.locator("#runbook-link").get_attribute("href").startswith("/docs/findings/#")
    )
    watched.page.fill("#id_ack-reason", "on it: ticket OPS-42")
    watched.page.click("#acknowledge-form button[type=submit]")
    watched.page.wait_for_selector("#finding-ack")
    assert "OPS-42" in watched.page.inner_text("#finding-ack")
    assert watched.page.evaluate(OVERFLOWS) == []
    watched.screenshot(f"finding-acknowledged-{width}")
    assert Finding.objects.filter(ack_reason="on it: ticket OPS-42").count() == 1
    watched.page.click("#unacknowledge-form button[type=submit]")
    watched.page.wait_for_selector("#finding-ack-withdrawn")
    assert "withdrawn by oncall" in watched.page.inner_text("#finding-ack-withdrawn")
    assert watched.page.locator("#acknowledge-form").is_visible()
    assert watched.page.evaluate(OVERFLOWS) == []
    watched.screenshot(f"finding-ack-withdrawn-{width}")
    watched.assert_clean()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_node_is_bound_to_a_server_through_the_picker(staff_at, width):
    fleet()
    node = Node.objects.get(name="gpu-b02")
    watched = staff_at(width)
    watched.open("/nodes/")
    watched.page.click(f"a[href='/nodes/{node.pk}/']")
    watched.page.wait_for_selector("#bind-form")
    assert "No server is bound" in watched.page.inner_text("#node-server")
    options = watched.page.locator("#server-choices option")
    assert "l40s-01" in [options.nth(i).get_attribute("value") for i in range(options.count())]
    watched.page.fill("#id_server", "l40s-01")
    watched.page.click("#bind-form button[type=submit]")
    watched.page.wait_for_selector("#node-server a")
    assert "l40s-01" in watched.page.inner_text("#node-server")
    assert "set by a person" in watched.page.inner_text("#node-server")
    assert watched.page.evaluate(OVERFLOWS) == []
    watched.screenshot(f"node-bound-{width}")
    watched.assert_clean()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_demo_slurm_answer_keeps_one_model_or_says_it_mixes(staff_at, width):
    call_command("demo")
    watched = staff_at(width)
    path = "/placement/?tab=placement&cluster=hpc-slurm&gpus=3"  # the demo's jobs leave 2 + 1 free
    watched.open(path, wait_for="#placement-answer")
    answer = watched.page.inner_text("#placement-answer")
    assert "One GPU model" in answer or "slowest GPU's pace" in answer
    assert "too_small" not in watched.page.inner_text("main")
    assert watched.page.evaluate(OVERFLOWS) == []
    watched.screenshot(f"placement-demo-3-slurm-{width}")
    watched.open(
        "/placement/?tab=placement&scheduler=kubernetes&gpus=16", wait_for="#placement-answer"
    )
    assert watched.page.locator("select[name=scheduler]").input_value() == "kubernetes"
    scope = watched.page.inner_text("#placement-scope")
    assert "Kubernetes clusters only" in scope and "hpc-slurm (Slurm) not considered" in scope
    clusters = watched.page.locator("#placement-clusters tbody tr").all_inner_texts()
    assert clusters and all("kubernetes" in row and "hpc-slurm" not in row for row in clusters)
    assert watched.page.evaluate(OVERFLOWS) == []
    watched.screenshot(f"placement-demo-pod-kubernetes-only-{width}")
    watched.assert_clean()
