"""One answer on every page (issue 23 §2), clicked from the overview to Placement and asked
through its form on the demo fleet, at 1440 and 390 px: the 3-GPU Slurm job keeps to one GPU
model until "mix GPU models" is ticked; an 8-GPU node's alternatives never name the server
with the lost GPU the answer blocks, and following one answers as it said and as the API does;
a MIG request by slices (`1g`) from the fleet's profiles, and one a cluster lacks saying where
that profile is free. Screenshots, light and dark, go to test-artifacts/
(`ATLAS_TEST_ARTIFACTS`)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlparse

import pytest
from django.core.management import call_command

from placement.service import placement_find

from .conftest import OVERFLOWS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _nodes(page) -> list[str]:
    cells = page.locator("#placement-nodes tbody tr td:first-child a").all_inner_texts()
    return [c.strip() for c in cells]


def _ask(page, **fields: str) -> None:
    """Fill the placement form as a person would (every field named, the rest emptied) and
    press Place."""
    form = page.locator("#placement-form")
    form.locator("select[name=scheduler]").select_option(fields.get("scheduler", ""))
    form.locator("select[name=cluster]").select_option(fields.get("cluster", ""))
    for name in ("gpus", "nodes", "gpus_per_node", "model", "mig_profile"):
        form.locator(f"input[name={name}]").fill(fields.get(name, ""))
    form.locator("input[name=mix_models]").set_checked(bool(fields.get("mix_models")))
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    page.wait_for_selector("#placement-answer")


def _asked(url: str) -> dict:
    """The page's query as `placement_find` keywords (what the API reads)."""
    query = dict(parse_qsl(urlparse(url).query))
    query.pop("tab", None)
    found: dict = {}
    for key, value in query.items():
        if key in ("gpus", "nodes", "gpus_per_node"):
            found[key] = int(value)
        elif key in ("mix_models", "nvlink_only", "same_numa"):
            found[key] = value.lower() in ("true", "1", "on")
        else:
            found[key] = value
    return found


def _shots(watched, name: str, width: int) -> None:
    watched.page.emulate_media(color_scheme="light")
    watched.screenshot(f"placement-{name}-{width}-light")
    watched.page.emulate_media(color_scheme="dark")
    watched.screenshot(f"placement-{name}-{width}-dark")
    watched.page.emulate_media(color_scheme="light")


@pytest.mark.parametrize("width", (1440, 390))
def test_placement_gives_one_answer_from_the_form_and_its_alternatives(signed_in_at, width):
    call_command("demo")
    watched = signed_in_at(width)
    page = watched.page
    watched.open("/")
    if page.locator(".nav-toggle").is_visible():
        page.locator(".nav-toggle").click()
    with page.expect_navigation():
        page.locator("#menu-layers a[href='/placement/']").click()
    page.wait_for_selector("#placement-form")
    # the form offers the fleet's MIG profiles and their slices
    offered = page.locator("#mig-profiles option")
    values = [offered.nth(i).get_attribute("value") for i in range(offered.count())]
    assert values[0] == "1g" and "1g.10gb" in values and "4g.40gb" in values

    # 3 GPUs for Slurm (the demo's jobs leave 2 H100s and 1 A100 free): no one model holds
    # them, and the answer says mixing would
    _ask(page, scheduler="slurm", gpus="3")
    answer = page.inner_text("#placement-answer")
    assert "does not fit" in answer and "fits only by mixing GPU models" in answer
    assert not page.locator("input[name=mix_models]").is_checked()
    _shots(watched, "16-one-model", width)
    # ticking the box changes the request: it fits, mixing, and says what that costs
    _ask(page, scheduler="slurm", gpus="3", mix_models="true")
    assert page.locator("input[name=mix_models]").is_checked()
    assert "slowest GPU's pace" in page.inner_text("#placement-cost")
    mixed = placement_find(scheduler="slurm", gpus=3, mix_models=True)
    assert mixed.fits and _nodes(page) == [n.node for n in mixed.nodes] and len(mixed.nodes) == 2
    assert page.evaluate(OVERFLOWS) == []
    _shots(watched, "16-mixed", width)

    # one 8-GPU Slurm node: dgx-h100-10 has 7 and a lost GPU; no alternative names it
    _ask(page, cluster="hpc-slurm", nodes="1", gpus_per_node="8")
    blocked = page.inner_text("#placement-blocked")
    assert "dgx-h100-10" in blocked and "unhealthy or lost GPUs" in blocked
    items = page.locator("#placement-alternatives li").all_inner_texts()
    assert items and all("dgx-h100-10" not in item for item in items)
    _shots(watched, "8-alternatives", width)
    link = page.locator("#placement-alternatives li a").first
    named = items[0].rsplit(" on ", 1)[1].split(", ")
    with page.expect_navigation():
        link.click()
    page.wait_for_selector("#placement-nodes")
    assert "fits" in page.inner_text("#placement-answer h2")
    assert _nodes(page) == named  # as the alternative said
    followed = placement_find(**_asked(page.url))  # as the API answers the same query
    assert [n.node for n in followed.nodes] == named

    # MIG by slices: 1g takes the fleet's 1g.10gb
    _ask(page, scheduler="slurm", gpus="3", mig_profile="1g")
    assert "3 MIG 1g.10gb devices" in page.inner_text("#placement-answer h2")
    # a cluster without that profile says where it is free
    _ask(page, cluster="prod-k8s", gpus="1", mig_profile="1g.10gb")
    assert page.inner_text("#placement-reason") == (
        "no 1g.10gb in cluster prod-k8s; 9 free on Slurm cluster hpc-slurm: dgx-a100-01"
    )
    assert page.evaluate(OVERFLOWS) == []
    _shots(watched, "mig-elsewhere", width)
    watched.assert_clean()
