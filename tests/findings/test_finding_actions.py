"""Findings a person can act on: a page, a runbook link, acknowledge and silence (page, API)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from findings.choices import FindingType, Severity
from findings.models import Finding
from findings.runbook import render_runbook, runbook_html
from findings.selectors import open_findings_by_severity, top_open_findings
from findings.services import (
    SILENCE_MAX,
    FindingActionRejected,
    finding_acknowledge,
    finding_silence,
    finding_unacknowledge,
    finding_unsilence,
    silence_until_errors,
)
from integrations.services.alertmanager import alerts_due

pytestmark = pytest.mark.django_db


def finding(n: int = 0, severity: str = Severity.WARNING, **kw) -> Finding:
    return Finding.objects.create(
        type=FindingType.NODE_WITHOUT_SERVER,
        severity=severity,
        subject=f"node:prod/gpu-{n:03d}",
        message=f"gpu-{n:03d} <b>has no server</b>",
        **kw,
    )


def test_silence_must_end_ahead_and_not_too_far():
    now = timezone.now()
    assert silence_until_errors(until=now + timedelta(hours=1), now=now) == []
    assert silence_until_errors(until=now, now=now)
    assert silence_until_errors(until=now + SILENCE_MAX + timedelta(seconds=1), now=now)
    assert silence_until_errors(until=None, now=now)


def test_the_runbook_renders_escaped_with_an_anchor_per_type():
    source = "## gpu_lost\n\n**Lost.** Run `nvidia-smi` <script>x</script>\n\n- a\n  b"
    html = render_runbook(source)
    assert '<h2 id="gpu_lost">gpu_lost</h2>' in html
    assert "<strong>Lost.</strong>" in html and "<code>nvidia-smi</code>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<li>a b</li>" in html
    assert 'id="node_without_server"' in runbook_html()


def test_the_runbook_page_has_each_section(client, user):
    client.force_login(user)
    body = client.get("/docs/findings/").content.decode()
    assert 'id="gpu_count_mismatch"' in body


def test_the_finding_page_links_the_runbook_and_shows_absolute_times(client, user):
    f = finding()
    client.force_login(user)
    body = client.get(f"/findings/{f.pk}/").content.decode()
    assert "/docs/findings/#node_without_server" in body
    assert f.first_seen.strftime("%Y-%m-%d %H:%M") in body
    assert "&lt;b&gt;has no server" in body  # the message is escaped
    assert 'id="acknowledge-form"' not in body  # a reader sees no action


def test_a_reader_cannot_acknowledge(client, user):
    f = finding()
    client.force_login(user)
    response = client.post(f"/findings/{f.pk}/", {"action": "acknowledge", "ack-reason": "x"})
    assert response.status_code == 403
    f.refresh_from_db()
    assert f.ack_at is None


def test_staff_acknowledge_on_the_page_and_resolving_ends_it(client, staff):
    f = finding()
    client.force_login(staff)
    response = client.post(
        f"/findings/{f.pk}/", {"action": "acknowledge", "ack-reason": "replacing the PSU"}
    )
    assert response.status_code == 302
    f.refresh_from_db()
    assert f.acknowledged and f.ack_by == staff and f.ack_reason == "replacing the PSU"
    assert "replacing the PSU" in client.get(f"/findings/{f.pk}/").content.decode()
    f.resolved_at = timezone.now()
    f.save()
    assert not f.acknowledged
    f.resolved_at, f.reopened_count = None, 1  # reopened: news again
    f.save()
    assert not f.acknowledged


def test_a_silence_form_error_names_the_field_and_keeps_the_input(client, staff):
    f = finding()
    client.force_login(staff)
    past = (timezone.now() - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    response = client.post(
        f"/findings/{f.pk}/",
        {"action": "silence", "silence-reason": "maintenance", "silence-until": past},
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert "A silence must end in the future." in body and 'value="maintenance"' in body


def test_api_acknowledge_and_silence(staff_api):
    f = finding()
    response = staff_api.post(
        f"/api/v1/findings/{f.pk}/acknowledge/", {"reason": "on it"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.data["acknowledgement"]["by"] == "staff"
    assert response.data["runbook_url"].endswith("/docs/findings/#node_without_server")
    until = timezone.now() + timedelta(hours=4)
    response = staff_api.post(
        f"/api/v1/findings/{f.pk}/silence/",
        {"reason": "rack maintenance", "until": until.isoformat()},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.data["silence"]["reason"] == "rack maintenance"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("acknowledge", {}, "reason"),
        ("silence", {"reason": "x"}, "until"),
        ("silence", {"reason": "x", "until": "yesterday"}, "until"),
        ("silence", {"reason": "x", "until": "2001-01-01T00:00:00Z"}, "until"),
    ],
)
def test_api_bad_input_is_a_field_level_400(staff_api, path, body, field):
    f = finding()
    response = staff_api.post(f"/api/v1/findings/{f.pk}/{path}/", body, format="json")
    assert response.status_code == 400
    assert field in str(response.data)


def test_api_actions_are_for_staff(api):
    f = finding()
    response = api.post(f"/api/v1/findings/{f.pk}/acknowledge/", {"reason": "x"}, format="json")
    assert response.status_code == 403


def test_a_silenced_finding_leaves_the_counts_and_the_alerts(settings):
    loud, quiet = finding(1), finding(2)
    quiet.silenced_until = timezone.now() + timedelta(hours=1)
    quiet.save()
    assert open_findings_by_severity() == {"warning": 1}
    assert [f.pk for f in top_open_findings()["shown"]] == [loud.pk]
    now = timezone.now()
    alerts = alerts_due(now=now, since=now - timedelta(minutes=5))
    assert len(alerts) == 1
    quiet.silenced_until = timezone.now() - timedelta(seconds=1)  # expired
    quiet.save()
    assert open_findings_by_severity() == {"warning": 2}


def test_overview_findings_are_links_by_severity_with_more(client, user):
    for n in range(10):
        finding(n, severity=Severity.INFO)
    critical = finding(99, severity=Severity.CRITICAL)
    client.force_login(user)
    body = client.get("/").content.decode()
    assert f'href="/findings/{critical.pk}/"' in body
    assert body.index(f"/findings/{critical.pk}/") < body.index("gpu-000")
    assert "gpu-006" in body and "gpu-007" not in body  # ties by id: the oldest shown
    assert "+3 more" in body
    assert critical.first_seen.strftime("%Y-%m-%d %H:%M") in body


def test_finding_pages_cost_the_same_queries_for_few_and_many(client, user):
    client.force_login(user)

    def count(path: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(path).status_code == 200
        return len(ctx.captured_queries)

    finding(0)
    first = Finding.objects.get()
    small = (count("/findings/"), count(f"/findings/{first.pk}/"))
    for n in range(1, 40):
        finding(n)
    assert (count("/findings/"), count(f"/findings/{first.pk}/")) == small


# Taking an action back ----------------------------------------------------------------


def test_an_acknowledgement_taken_back_records_who_and_when(staff, django_user_model):
    f = finding()
    other = django_user_model.objects.create_user("night-shift", is_staff=True)
    finding_acknowledge(finding=f, user=staff, reason="on it")
    finding_unacknowledge(finding=f, user=other)
    f = Finding.objects.get(pk=f.pk)
    assert not f.acknowledged and f.ack_withdrawn
    assert (f.ack_withdrawn_by, f.ack_by, f.ack_reason) == (other, staff, "on it")
    assert abs((timezone.now() - f.ack_withdrawn_at).total_seconds()) < 60
    with pytest.raises(FindingActionRejected) as exc:
        finding_unacknowledge(finding=f, user=staff)
    assert list(exc.value.errors) == ["finding"]
    finding_acknowledge(finding=f, user=staff, reason="on it again")
    assert f.acknowledged and not f.ack_withdrawn


def test_a_silence_lifted_early_counts_and_alerts_again(staff):
    f = finding()
    finding_silence(
        finding=f, user=staff, reason="maintenance", until=timezone.now() + timedelta(hours=2)
    )
    assert open_findings_by_severity() == {}
    now = timezone.now()
    assert alerts_due(now=now, since=now - timedelta(minutes=5)) == []
    finding_unsilence(finding=f, user=staff)
    f = Finding.objects.get(pk=f.pk)
    assert not f.silenced() and f.silence_lifted and f.silence_lifted_by == staff
    assert f.silence_reason == "maintenance"  # the silence's own record stays
    assert open_findings_by_severity() == {"warning": 1}
    now = timezone.now()
    assert len(alerts_due(now=now, since=now - timedelta(minutes=5))) == 1
    with pytest.raises(FindingActionRejected) as exc:
        finding_unsilence(finding=f, user=staff)
    assert list(exc.value.errors) == ["finding"]


def test_staff_take_actions_back_on_the_page(client, staff):
    f = finding()
    client.force_login(staff)
    client.post(f"/findings/{f.pk}/", {"action": "acknowledge", "ack-reason": "on it"})
    until = (timezone.now() + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")
    client.post(
        f"/findings/{f.pk}/",
        {"action": "silence", "silence-reason": "maintenance", "silence-until": until},
    )
    body = client.get(f"/findings/{f.pk}/").content.decode()
    assert 'id="unacknowledge-form"' in body and 'id="acknowledge-form"' not in body
    assert 'id="unsilence-form"' in body
    for action in ("unacknowledge", "unsilence"):
        response = client.post(f"/findings/{f.pk}/", {"action": action})
        assert response.status_code == 302
    body = client.get(f"/findings/{f.pk}/").content.decode()
    withdrawn = body[body.index('id="finding-ack-withdrawn"') :]
    assert "withdrawn by staff" in withdrawn[: withdrawn.index("</p>")]
    assert "lifted by staff" in body and 'id="finding-silence"' not in body
    assert 'id="acknowledge-form"' in body and 'id="unsilence-form"' not in body
    # Taking back what is already taken back changes nothing and fails nothing.
    assert client.post(f"/findings/{f.pk}/", {"action": "unsilence"}).status_code == 302


def test_a_reader_cannot_take_an_action_back(client, user, staff):
    f = finding()
    finding_acknowledge(finding=f, user=staff, reason="on it")
    client.force_login(user)
    assert client.post(f"/findings/{f.pk}/", {"action": "unacknowledge"}).status_code == 403
    assert Finding.objects.get(pk=f.pk).acknowledged


def test_api_unacknowledge_and_unsilence(staff_api, api, staff):
    f = finding()
    finding_acknowledge(finding=f, user=staff, reason="on it")
    finding_silence(
        finding=f, user=staff, reason="quiet", until=timezone.now() + timedelta(hours=1)
    )
    assert api.post(f"/api/v1/findings/{f.pk}/unacknowledge/").status_code == 403
    response = staff_api.post(f"/api/v1/findings/{f.pk}/unacknowledge/")
    assert response.status_code == 200, response.content
    assert response.data["acknowledgement"] is None
    assert response.data["acknowledgement_withdrawn"]["by"] == "staff"
    assert response.data["silence_lifted"] is None
    again = staff_api.post(f"/api/v1/findings/{f.pk}/unacknowledge/")
    assert again.status_code == 400 and "finding" in again.json()
    response = staff_api.post(f"/api/v1/findings/{f.pk}/unsilence/")
    assert response.status_code == 200, response.content
    assert response.data["silence"] is None and response.data["silence_lifted"]["by"] == "staff"
    assert staff_api.post(f"/api/v1/findings/{f.pk}/unsilence/").status_code == 400
    listed = api.get("/api/v1/findings/").json()["results"][0]
    assert listed["acknowledgement_withdrawn"]["at"] and listed["silence_lifted"]["at"]
    schema = api.get("/api/schema/?format=json").json()
    for path in ("unacknowledge", "unsilence"):
        assert f"/api/v1/findings/{{id}}/{path}/" in schema["paths"]
    props = schema["components"]["schemas"]["Finding"]["properties"]
    assert {"acknowledgement_withdrawn", "silence_lifted"} <= set(props)
