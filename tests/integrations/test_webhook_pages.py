"""Webhooks managed from pages (issue 23): staff list them with their events, state and last
delivery, create, change and delete them (the secret write-only), and read one webhook's
deliveries; readers get 403; everything a person typed is escaped."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from integrations.choices import DeliveryStatus
from integrations.models import Delivery, Webhook

pytestmark = pytest.mark.django_db

SECRET = "s3cret-for-signing-0123456789"


def a_webhook(n: int = 0, **kw) -> Webhook:
    return Webhook.objects.create(
        url=f"https://hooks.example/{n}", secret=SECRET, events=["finding.raised"], **kw
    )


def test_readers_get_403_and_anonymous_the_login(client, user):
    webhook = a_webhook()
    for path in ("/webhooks/", "/webhooks/new/", f"/webhooks/{webhook.pk}/"):
        assert client.get(path).status_code == 302
    client.force_login(user)
    for path in ("/webhooks/", "/webhooks/new/", f"/webhooks/{webhook.pk}/"):
        assert client.get(path).status_code == 403
    assert client.post(f"/webhooks/{webhook.pk}/delete/").status_code == 403
    assert Webhook.objects.count() == 1
    assert "/webhooks/" not in client.get("/").content.decode()  # no menu entry for readers


def test_staff_create_a_webhook_and_its_secret_is_never_shown(client, staff):
    client.force_login(staff)
    assert 'href="/webhooks/"' in client.get("/").content.decode()
    response = client.post(
        "/webhooks/new/",
        {
            "url": "https://hooks.example/<b>x</b>",
            "secret": SECRET,
            "events": ["finding.raised", "finding.resolved"],
            "active": "on",
            "description": "<script>alert(1)</script>",
        },
    )
    webhook = Webhook.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/webhooks/{webhook.pk}/"
    assert webhook.secret == SECRET and webhook.created_by == staff
    assert webhook.events == ["finding.raised", "finding.resolved"]
    for path in ("/webhooks/", f"/webhooks/{webhook.pk}/", f"/webhooks/{webhook.pk}/edit/"):
        body = client.get(path).content.decode()
        assert SECRET not in body
        assert "<script>alert(1)</script>" not in body and "<b>x</b>" not in body
    body = client.get("/webhooks/").content.decode()
    assert "finding.resolved" in body and "active" in body and "none yet" in body


@pytest.mark.parametrize(
    ("field", "value"),
    [("url", "ftp://hooks.example/"), ("secret", "short"), ("events", [])],
)
def test_a_bad_webhook_is_refused_by_field(client, staff, field, value):
    client.force_login(staff)
    data = {"url": "https://hooks.example/", "secret": SECRET, "events": ["finding.raised"]}
    data[field] = value
    response = client.post("/webhooks/new/", data)
    assert response.status_code == 200 and field in response.context["form"].errors
    assert not Webhook.objects.exists()


def test_changing_a_webhook_keeps_its_secret_unless_given(client, staff):
    webhook = a_webhook()
    client.force_login(staff)
    data = {"url": "https://hooks.example/new", "events": ["finding.resolved"], "secret": ""}
    assert client.post(f"/webhooks/{webhook.pk}/edit/", data).status_code == 302
    webhook.refresh_from_db()
    assert (webhook.url, webhook.events, webhook.active) == (
        "https://hooks.example/new",
        ["finding.resolved"],
        False,
    )
    assert webhook.secret == SECRET
    data["secret"], data["active"] = "another-secret-0123456789", "on"
    client.post(f"/webhooks/{webhook.pk}/edit/", data)
    webhook.refresh_from_db()
    assert webhook.secret == "another-secret-0123456789" and webhook.active


def test_deleting_a_webhook_asks_then_removes_it(client, staff):
    webhook = a_webhook()
    client.force_login(staff)
    assert "Delete webhook" in client.get(f"/webhooks/{webhook.pk}/delete/").content.decode()
    assert Webhook.objects.exists()
    response = client.post(f"/webhooks/{webhook.pk}/delete/")
    assert response.status_code == 302 and response["Location"] == "/webhooks/"
    assert not Webhook.objects.exists()


def test_the_detail_lists_deliveries_with_status_attempts_answer_and_next_retry(client, staff):
    webhook = a_webhook()
    retry = timezone.now() + timedelta(minutes=5)
    Delivery.objects.create(
        webhook=webhook,
        event="finding.raised",
        payload={},
        occurrence=0,
        status=DeliveryStatus.PENDING,
        attempts=2,
        response_status=503,
        next_attempt_at=retry,
        last_error="<i>busy</i>",
    )
    Delivery.objects.create(
        webhook=webhook,
        event="finding.resolved",
        payload={},
        occurrence=1,
        status=DeliveryStatus.DELIVERED,
        attempts=1,
        response_status=204,
    )
    client.force_login(staff)
    body = client.get(f"/webhooks/{webhook.pk}/").content.decode()
    table = body[body.index('id="deliveries"') :]
    assert "503" in table and "204" in table and "pending" in table and "delivered" in table
    assert retry.strftime("%Y-%m-%d %H:%M") in table
    assert "&lt;i&gt;busy&lt;/i&gt;" in table
    listed = client.get("/webhooks/").content.decode()
    assert "delivered" in listed and "HTTP 204" in listed


def test_the_list_costs_the_same_queries_for_few_and_many(client, staff):
    client.force_login(staff)

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/webhooks/").status_code == 200
        return len(ctx.captured_queries)

    first = a_webhook(0)
    Delivery.objects.create(webhook=first, event="finding.raised", payload={})
    small = count()
    for n in range(1, 20):
        w = a_webhook(n)
        Delivery.objects.create(webhook=w, event="finding.raised", payload={})
    assert count() == small
