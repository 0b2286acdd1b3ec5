"""Acting on many findings at once (issue 23, item 6): staff tick findings on the page, or name
them to the API, and acknowledge, silence or take acknowledgements back in one go, each
finding audited as one acted on alone."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from findings.choices import FindingType, Severity
from findings.models import Finding
from findings.services import (
    BULK_MAX,
    BulkAction,
    FindingActionRejected,
    finding_acknowledge,
    findings_act,
)

pytestmark = pytest.mark.django_db


def skew(n: int, **kw) -> Finding:
    return Finding.objects.create(
        type=FindingType.DRIVER_SKEW,
        severity=Severity.WARNING,
        subject=f"cluster:{n}:driver",
        message=f"prod-{n}: 2 NVIDIA driver versions <b>in one cluster</b>",
        **kw,
    )


def test_acknowledging_many_audits_each_as_one_alone(staff):
    findings = [skew(n) for n in range(3)]
    outcome = findings_act(
        finding_ids=[f.pk for f in findings],
        user=staff,
        action=BulkAction.ACKNOWLEDGE,
        reason="on it: OPS-7",
    )
    assert outcome.done == sorted(f.pk for f in findings) and outcome.skipped == {}
    for f in Finding.objects.all():
        assert f.acknowledged and f.ack_by == staff and f.ack_reason == "on it: OPS-7"
        assert f.ack_at is not None and f.ack_occurrence == f.reopened_count


def test_a_finding_the_action_does_not_fit_is_skipped_and_named(staff):
    live, resolved = skew(1), skew(2, resolved_at=timezone.now())
    outcome = findings_act(
        finding_ids=[live.pk, resolved.pk, 999_999],
        user=staff,
        action=BulkAction.ACKNOWLEDGE,
        reason="on it",
    )
    assert outcome.done == [live.pk]
    assert set(outcome.skipped) == {resolved.pk, 999_999}
    assert "resolved" in outcome.skipped[resolved.pk]
    assert outcome.skipped[999_999] == "No such finding."


def test_bad_input_changes_nothing(staff):
    f = skew(1)
    for kwargs in (
        {"action": BulkAction.ACKNOWLEDGE, "reason": " "},
        {"action": BulkAction.SILENCE, "reason": "x", "until": timezone.now() - timedelta(1)},
        {"action": BulkAction.SILENCE, "reason": "x", "until": timezone.now() + timedelta(91)},
        {"action": "delete", "reason": "x"},
    ):
        with pytest.raises(FindingActionRejected):
            findings_act(finding_ids=[f.pk], user=staff, **kwargs)
    with pytest.raises(FindingActionRejected):
        findings_act(finding_ids=[], user=staff, action=BulkAction.UNACKNOWLEDGE)
    with pytest.raises(FindingActionRejected):
        findings_act(
            finding_ids=range(1, BULK_MAX + 2), user=staff, action=BulkAction.UNACKNOWLEDGE
        )
    f.refresh_from_db()
    assert not f.acknowledged and not f.silenced()


def test_silence_and_unacknowledge_many(staff):
    a, b = skew(1), skew(2)
    finding_acknowledge(finding=a, user=staff, reason="on it")
    until = timezone.now() + timedelta(hours=4)
    silenced = findings_act(
        finding_ids=[a.pk, b.pk], user=staff, action=BulkAction.SILENCE, reason="known", until=until
    )
    assert silenced.done == [a.pk, b.pk]
    withdrawn = findings_act(finding_ids=[a.pk, b.pk], user=staff, action=BulkAction.UNACKNOWLEDGE)
    assert withdrawn.done == [a.pk] and list(withdrawn.skipped) == [b.pk]
    a.refresh_from_db(), b.refresh_from_db()
    assert a.silenced() and b.silenced() and a.silenced_by == staff and a.silence_reason == "known"
    assert not a.acknowledged and a.ack_withdrawn_by == staff


def test_the_page_shows_checkboxes_to_staff_only(client, user, staff):
    skew(1)
    client.force_login(user)
    body = client.get("/findings/").content.decode()
    assert "bulk-form" not in body and 'class="bulk-select"' not in body
    client.force_login(staff)
    body = client.get("/findings/").content.decode()
    assert 'id="bulk-form"' in body and 'class="bulk-select"' in body
    assert "Select all on this page" in body
    assert 'name="csrfmiddlewaretoken"' in body
    # The resolved list and the CSV have no checkbox column.
    assert 'class="bulk-select"' not in client.get("/findings/?open=false").content.decode()
    csv = b"".join(client.get("/findings/?format=csv").streaming_content).decode()
    assert not csv.startswith("Select")


def test_staff_act_on_ticked_findings_from_the_page(client, staff):
    findings = [skew(n) for n in range(4)]
    client.force_login(staff)
    ticked = [f.pk for f in findings[:3]]
    response = client.post(
        "/findings/?type=driver_skew",
        {"ids": ticked, "action": "acknowledge", "reason": "on it: OPS-8", "hours": "24"},
    )
    assert response.status_code == 302 and response["Location"] == "/findings/?type=driver_skew"
    assert set(
        Finding.objects.filter(ack_reason="on it: OPS-8").values_list("id", flat=True)
    ) == set(ticked)
    body = client.get(response["Location"]).content.decode()
    assert "3 findings acknowledged." in body
    response = client.post(
        "/findings/", {"ids": ticked, "action": "silence", "reason": "known", "hours": "4"}
    )
    silenced = Finding.objects.filter(silence_reason="known")
    assert silenced.count() == 3
    assert all(
        timedelta(hours=3, minutes=59) < f.silenced_until - timezone.now() <= timedelta(hours=4)
        for f in silenced
    )


def test_a_page_action_without_a_reason_says_so_and_changes_nothing(client, staff):
    f = skew(1)
    client.force_login(staff)
    response = client.post("/findings/", {"ids": [f.pk], "action": "acknowledge", "reason": ""})
    body = client.get(response["Location"]).content.decode()
    assert "Say why." in body
    f.refresh_from_db()
    assert not f.acknowledged


def test_a_reader_cannot_post_bulk_actions(client, user):
    f = skew(1)
    client.force_login(user)
    response = client.post("/findings/", {"ids": [f.pk], "action": "acknowledge", "reason": "x"})
    assert response.status_code == 403
    f.refresh_from_db()
    assert not f.acknowledged


def test_the_bulk_post_needs_the_csrf_token(staff):
    from django.test import Client

    f = skew(1)
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)
    response = client.post("/findings/", {"ids": [f.pk], "action": "acknowledge", "reason": "x"})
    assert response.status_code == 403
    f.refresh_from_db()
    assert not f.acknowledged


def test_the_staff_page_costs_the_same_queries_for_few_and_many(client, staff):
    client.force_login(staff)

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/findings/").status_code == 200
        return len(ctx.captured_queries)

    skew(0)
    small = count()
    for n in range(1, 40):
        skew(n)
    assert count() == small


def test_api_bulk_acknowledge_silence_and_unacknowledge(staff_api):
    a, b, gone = skew(1), skew(2), skew(3, resolved_at=timezone.now())
    response = staff_api.post(
        "/api/v1/findings/acknowledge/",
        {"ids": [a.pk, b.pk, gone.pk], "reason": "on it"},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["done"] == [a.pk, b.pk]
    assert [s["id"] for s in response.json()["skipped"]] == [gone.pk]
    until = (timezone.now() + timedelta(hours=2)).isoformat()
    response = staff_api.post(
        "/api/v1/findings/silence/",
        {"ids": [a.pk], "reason": "known", "until": until},
        format="json",
    )
    assert response.status_code == 200 and response.json()["done"] == [a.pk]
    response = staff_api.post(
        "/api/v1/findings/unacknowledge/", {"ids": [a.pk, b.pk]}, format="json"
    )
    assert response.json() == {"done": [a.pk, b.pk], "skipped": []}


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("acknowledge", {"ids": [], "reason": "x"}, "ids"),
        ("acknowledge", {"ids": ["x"], "reason": "x"}, "ids"),
        ("acknowledge", {"ids": [1]}, "reason"),
        ("silence", {"ids": [1], "reason": "x", "until": "2000-01-01T00:00:00Z"}, "until"),
        ("unacknowledge", {"ids": list(range(1, BULK_MAX + 2))}, "ids"),
    ],
)
def test_api_bulk_bad_input_is_a_field_level_400(staff_api, path, body, field):
    response = staff_api.post(f"/api/v1/findings/{path}/", body, format="json")
    assert response.status_code == 400 and field in response.json(), response.content


def test_api_bulk_actions_are_for_staff(api):
    f = skew(1)
    response = api.post(
        "/api/v1/findings/acknowledge/", {"ids": [f.pk], "reason": "x"}, format="json"
    )
    assert response.status_code == 403
    assert APIClient().post("/api/v1/findings/acknowledge/", {}, format="json").status_code in (
        401,
        403,
    )


def test_the_schema_documents_the_bulk_actions(staff_api):
    schema = staff_api.get("/api/schema/", {"format": "json"}).json()
    for name in ("acknowledge", "silence", "unacknowledge"):
        operation = schema["paths"][f"/api/v1/findings/{name}/"]["post"]
        assert "requestBody" in operation and "200" in operation["responses"]


@pytest.mark.parametrize("path", ["acknowledge", "unacknowledge"])
def test_an_id_beyond_64_bits_is_a_field_level_400(staff_api, path):
    response = staff_api.post(
        f"/api/v1/findings/{path}/", {"ids": [5, 2**80], "reason": "x"}, format="json"
    )
    assert response.status_code == 400
    assert "ids" in json.dumps(response.json())
