"""The health pages in a browser: Health in the menu, a GPU needing action, its lifecycle page;
agent text stays text (no dialog), the figure draws, nothing breaks the policy.
Screenshots go to test-artifacts/health-*.png."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from health.services import health_findings_sync, health_sweep
from inventory.models import Gpu
from tests.health.fleet import Agent, server_report, with_events, xid
from tests.reports import gpu_uuid

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BUS2 = "0000:38:00.0"
EVIL = "<img src=x onerror=alert(1)>"


def test_health_menu_to_a_gpu_needing_action_to_its_page(signed_in):
    recent = (timezone.now() - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    uuid = gpu_uuid("dgx-01", 2)
    events = (xid(79, BUS2, recent, uuid=uuid, message=EVIL), xid(13, BUS2, recent, uuid=uuid))
    Agent("dgx-01").send(with_events(server_report("dgx-01"), *events))
    health_sweep()
    health_findings_sync()
    gpu = Gpu.objects.get(uuid=uuid)

    page = signed_in.page
    signed_in.open("/")
    page.click("#menu-layers >> text=Health")
    page.wait_for_url(signed_in.base + "/health/")
    signed_in.figure("health-events")
    assert "dgx-01" in page.inner_text("#needing-action")
    signed_in.screenshot("health-1366")

    page.click(f'#needing-action a[href="/gpus/{gpu.pk}/"]')
    page.wait_for_url(signed_in.base + f"/gpus/{gpu.pk}/")
    assert EVIL in page.inner_text("#events")  # shown as text, never run
    assert page.get_attribute("#events abbr.event-code >> nth=0", "title")
    signed_in.screenshot("health-gpu-1366")
    signed_in.assert_clean()
