"""Acting on many findings at once and managing webhooks, clicked from the overview (issue 23,
item 6), at 1440 and 390 px: staff open Findings from the menu, tick several driver-skew
findings and acknowledge them at once; open Webhooks from the menu, create one, see it listed.
Screenshots, light and dark, go to test-artifacts/ (or ATLAS_TEST_ARTIFACTS)."""

from __future__ import annotations

import pytest

from findings.choices import FindingType, Severity
from findings.models import Finding
from integrations.models import Webhook

from .conftest import OVERFLOWS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def skew_findings(n: int = 4) -> list[Finding]:
    return [
        Finding.objects.create(
            type=FindingType.DRIVER_SKEW,
            severity=Severity.WARNING,
            subject=f"cluster:{i}:driver",
            message=f"prod-{i}: 2 NVIDIA driver versions in one cluster (550.54.15 on 7 "
            f"servers: gpu-01, gpu-02 and 5 more; 535.104.05 on 1 server: gpu-09)",
        )
        for i in range(n)
    ]


def menu(watched, name: str) -> None:
    """Click a menu entry, opening the menu first where it folds away (phones)."""
    toggle = watched.page.locator(".nav-toggle")
    if toggle.is_visible():
        toggle.click()
    watched.page.get_by_role("link", name=name, exact=True).click()


@pytest.mark.parametrize("width", (1440, 390))
@pytest.mark.parametrize("scheme", ("light", "dark"))
def test_staff_acknowledge_ticked_findings_and_add_a_webhook(signed_in_at, width, scheme):
    findings = skew_findings()
    watched = signed_in_at(width, staff=True)
    watched.page.emulate_media(color_scheme=scheme)
    watched.open("/")
    menu(watched, "Findings")
    watched.page.wait_for_selector("#bulk-form")
    ticked = findings[:3]
    for f in ticked:
        watched.page.check(f"input.bulk-select[value='{f.pk}']")
    assert "3 of 4 ticked" in watched.page.inner_text("#bulk-count")
    watched.page.select_option("#bulk-form select[name=action]", "acknowledge")
    assert not watched.page.locator("#bulk-hours").is_visible()
    watched.page.fill("#bulk-form input[name=reason]", "on it: OPS-99 driver rollout")
    assert watched.page.evaluate(OVERFLOWS) == []
    watched.screenshot(f"bulk-findings-ticked-{width}-{scheme}")
    watched.page.click("#bulk-form button[type=submit]")
    watched.page.wait_for_selector(".messages")
    assert "3 findings acknowledged." in watched.page.inner_text(".messages")
    for f in ticked:
        row = watched.page.locator("#findings tr", has=watched.page.locator(f"[value='{f.pk}']"))
        assert "acknowledged" in row.inner_text()
    assert set(Finding.objects.filter(ack_by__username="oncall").values_list("id", flat=True)) == {
        f.pk for f in ticked
    }
    # Select all on this page, then silence: the duration shows for a silence only.
    watched.page.check("#bulk-select-all")
    assert "4 of 4 ticked" in watched.page.inner_text("#bulk-count")
    watched.page.select_option("#bulk-form select[name=action]", "silence")
    assert watched.page.locator("#bulk-hours").is_visible()
    assert watched.page.evaluate(OVERFLOWS) == []
    watched.screenshot(f"bulk-findings-acknowledged-{width}-{scheme}")

    menu(watched, "Webhooks")
    watched.page.wait_for_selector("#webhooks")
    watched.page.click("#webhook-new")
    watched.page.fill("#id_url", "https://93.184.216.34/atlas")
    watched.page.fill("#id_secret", "s3cret-for-signing-0123456789")
    watched.page.check("input[name=events][value='finding.raised']")
    watched.page.fill("#id_description", "on-call <pager>")
    watched.screenshot(f"webhook-form-{width}-{scheme}")
    watched.page.click("#webhook-form button[type=submit]")
    watched.page.wait_for_selector("#deliveries")
    assert "s3cret" not in watched.page.content()
    menu(watched, "Webhooks")
    watched.page.wait_for_selector("#webhooks")
    listed = watched.page.inner_text("#webhooks")
    assert "https://93.184.216.34/atlas" in listed and "on-call <pager>" in listed
    assert "finding.raised" in listed and "active" in listed
    assert Webhook.objects.get().created_by.username == "oncall"
    assert watched.page.evaluate(OVERFLOWS) == []
    watched.screenshot(f"webhooks-listed-{width}-{scheme}")
    watched.assert_clean()
