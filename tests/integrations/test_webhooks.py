"""Signed webhooks: the staff API (secrets write-only, http/https only), the outbox scan
(idempotent, by watermark), signed deliveries verified by a receiver, retries after an outage."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from findings.models import Finding
from integrations.choices import DeliveryStatus
from integrations.models import Delivery, Webhook
from integrations.services.webhooks import (
    backoff,
    deliveries_due,
    delivery_attempt,
    webhook_outbox_scan,
)
from integrations.signing import signature, signature_valid
from integrations.tasks import scan_webhook_outbox
from tests.integrations.receiver import Receiver

pytestmark = pytest.mark.django_db

SECRET = "s3cret-for-signing-0123456789"


def a_webhook(url: str, events=("finding.raised", "finding.resolved")) -> Webhook:
    return Webhook.objects.create(
        url=url,
        secret=SECRET,
        events=list(events),
        created_at=timezone.now() - timedelta(seconds=1),
    )


def raise_finding(subject: str = "server:dgx-07", **extra) -> Finding:
    return Finding.objects.create(
        type="unhealthy_gpu",
        severity="critical",
        subject=subject,
        message=f"{subject}: GPU 3 fell off the bus",
        **extra,
    )


# The API -------------------------------------------------------------------------------


def test_staff_create_a_webhook_and_never_see_its_secret(staff_api):
    response = staff_api.post(
        "/api/v1/webhooks/",
        {"url": "https://hooks.example.org/atlas", "secret": SECRET, "events": ["finding.raised"]},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert SECRET not in response.content.decode()
    assert "secret" not in response.json()
    webhook_id = response.json()["id"]
    assert Webhook.objects.get(pk=webhook_id).secret == SECRET
    for path in ("/api/v1/webhooks/", f"/api/v1/webhooks/{webhook_id}/"):
        assert SECRET not in staff_api.get(path).content.decode()
    # Changing it without a secret keeps the secret.
    patched = staff_api.patch(f"/api/v1/webhooks/{webhook_id}/", {"active": False}, format="json")
    assert patched.status_code == 200 and SECRET not in patched.content.decode()
    assert Webhook.objects.get(pk=webhook_id).secret == SECRET
    assert SECRET not in repr(Webhook.objects.get(pk=webhook_id))


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://example.org/x"}, "url"),
        ({"url": "javascript:alert(1)"}, "url"),
        ({"url": "file:///etc/passwd"}, "url"),
        ({"url": "not a url"}, "url"),
        ({"events": []}, "events"),
        ({"events": ["finding.exploded"]}, "events"),
        ({"events": "finding.raised"}, "events"),
        ({"secret": "short"}, "secret"),
        ({"secret": None}, "secret"),
    ],
)
def test_bad_input_is_a_field_level_400(staff_api, body, field):
    good = {"url": "https://hooks.example.org/hook", "secret": SECRET, "events": ["finding.raised"]}
    response = staff_api.post("/api/v1/webhooks/", good | body, format="json")
    assert response.status_code == 400
    assert field in json.dumps(response.json())
    assert SECRET not in response.content.decode()


def test_only_staff_manage_webhooks(client, api):
    body = {"url": "https://example.org/", "secret": SECRET, "events": ["finding.raised"]}
    assert client.post("/api/v1/webhooks/", body).status_code in (401, 403)
    assert api.post("/api/v1/webhooks/", body, format="json").status_code == 403
    assert api.get("/api/v1/webhooks/").status_code == 403


# The outbox ----------------------------------------------------------------------------


def test_the_scan_makes_each_delivery_once():
    raised_only = a_webhook("http://127.0.0.1:9/a", events=["finding.raised"])
    both = a_webhook("http://127.0.0.1:9/b")
    finding = raise_finding()
    webhook_outbox_scan()
    webhook_outbox_scan()
    assert sorted(Delivery.objects.values_list("webhook_id", "event")) == [
        (raised_only.pk, "finding.raised"),
        (both.pk, "finding.raised"),
    ]
    Finding.objects.filter(pk=finding.pk).update(resolved_at=timezone.now())
    webhook_outbox_scan()
    webhook_outbox_scan()
    assert Delivery.objects.filter(event="finding.resolved").count() == 1
    # It comes back: a new occurrence, announced again.
    Finding.objects.filter(pk=finding.pk).update(
        resolved_at=None, first_seen=timezone.now(), reopened_count=1
    )
    webhook_outbox_scan()
    assert Delivery.objects.filter(event="finding.raised", occurrence=1).count() == 2
    assert Delivery.objects.count() == 5


def test_a_new_webhook_gets_no_backlog():
    raise_finding()
    Webhook.objects.create(url="http://127.0.0.1:9/a", secret=SECRET, events=["finding.raised"])
    webhook_outbox_scan()
    assert not Delivery.objects.exists()


def test_findings_older_than_the_last_scan_are_not_rescanned():
    a_webhook("http://127.0.0.1:9/a")
    webhook_outbox_scan(now=timezone.now())
    Finding.objects.create(
        type="stale_agent",
        severity="warning",
        subject="server:old",
        message="old",
        first_seen=timezone.now() - timedelta(hours=3),
    )
    webhook_outbox_scan()
    assert not Delivery.objects.exists()


# Delivering ----------------------------------------------------------------------------


@pytest.mark.usefixtures("loopback_allowed")
def test_a_receiver_verifies_the_signature(django_capture_on_commit_callbacks, settings):
    settings.ATLAS_PUBLIC_URL = "https://atlas.example.org"
    receiver = Receiver().start()
    try:
        a_webhook(receiver.url)
        finding = raise_finding(subject="server:<b>dgx-07</b>")
        with django_capture_on_commit_callbacks(execute=True):
            scan_webhook_outbox.delay()
        assert len(receiver.received) == 1
        got = receiver.received[0]
        headers = {k.lower(): v for k, v in got.headers.items()}
        assert signature_valid(got.body, SECRET, headers["x-atlas-signature"])
        assert not signature_valid(got.body + b" ", SECRET, headers["x-atlas-signature"])
        assert not signature_valid(got.body, SECRET + "x", headers["x-atlas-signature"])
        body = json.loads(got.body)
        assert body["event"] == "finding.raised" == headers["x-atlas-event"]
        assert str(body["id"]) == headers["x-atlas-delivery"]
        assert str(body["timestamp"]) == headers["x-atlas-timestamp"]
        assert abs(int(headers["x-atlas-timestamp"]) - timezone.now().timestamp()) < 60
        assert body["finding"]["id"] == finding.pk
        assert body["finding"]["url"] == f"https://atlas.example.org/findings/{finding.pk}/"
        assert body["finding"]["subject"] == "server:<b>dgx-07</b>"
        assert headers["content-type"] == "application/json"
        assert SECRET not in got.body.decode()
        delivery = Delivery.objects.get()
        assert (delivery.status, delivery.attempts, delivery.response_status) == (
            "delivered",
            1,
            204,
        )
    finally:
        receiver.stop()


def test_the_signature_is_hmac_sha256_of_the_body():
    # The value any receiver computes: hex HMAC-SHA256 with the secret as key.
    import hashlib
    import hmac

    expected = hmac.new(b"key", b'{"a":1}', hashlib.sha256).hexdigest()
    assert signature(b'{"a":1}', "key") == f"sha256={expected}"


@pytest.mark.usefixtures("loopback_allowed")
def test_a_receiver_down_then_up_gets_it_after_a_retry(caplog):
    caplog.set_level(logging.DEBUG)
    receiver = Receiver()  # not listening yet
    webhook = a_webhook(receiver.url)
    raise_finding()
    webhook_outbox_scan()
    delivery = Delivery.objects.get()
    now = timezone.now()
    assert delivery_attempt(delivery_id=delivery.pk, now=now) == DeliveryStatus.PENDING
    delivery.refresh_from_db()
    assert delivery.attempts == 1
    assert "could not reach" in delivery.last_error
    assert delivery.next_attempt_at == now + backoff(1)
    assert deliveries_due(now=now) == []  # waits for its backoff

    receiver.start()
    try:
        later = now + backoff(1)
        assert deliveries_due(now=later) == [delivery.pk]
        assert delivery_attempt(delivery_id=delivery.pk, now=later) == DeliveryStatus.DELIVERED
        assert delivery_attempt(delivery_id=delivery.pk, now=later) == "skipped"  # once only
        assert len(receiver.received) == 1
        body = receiver.received[0].body
        headers = {k.lower(): v for k, v in receiver.received[0].headers.items()}
        assert signature_valid(body, SECRET, headers["x-atlas-signature"])
    finally:
        receiver.stop()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("delivered", 2, "")
    assert SECRET not in caplog.text

    # What happened is listed, without the secret or the body.
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    admin = get_user_model().objects.create_user("ops", is_staff=True)
    client = APIClient()
    client.force_authenticate(admin)
    listed = client.get(f"/api/v1/webhooks/{webhook.pk}/deliveries/")
    assert listed.status_code == 200
    [item] = listed.json()["results"]
    assert item["status"] == "delivered" and item["attempts"] == 2
    assert SECRET not in listed.content.decode()


@pytest.mark.usefixtures("loopback_allowed")
def test_retries_back_off_and_stop_at_the_window(settings):
    settings.ATLAS_WEBHOOK_RETRY_WINDOW_S = 60
    receiver = Receiver(status=503).start()
    try:
        a_webhook(receiver.url)
        raise_finding()
        webhook_outbox_scan()
        delivery = Delivery.objects.get()
        now = timezone.now()
        assert delivery_attempt(delivery_id=delivery.pk, now=now) == "pending"  # +10 s
        now += backoff(1)
        assert delivery_attempt(delivery_id=delivery.pk, now=now) == "pending"  # +20 s
        now += backoff(2)
        assert delivery_attempt(delivery_id=delivery.pk, now=now) == "failed"  # +40 s > 60 s
        delivery.refresh_from_db()
        assert delivery.attempts == 3 and delivery.response_status == 503
        assert delivery.last_error == "HTTP 503 from the receiver"
        assert len(receiver.received) == 3
    finally:
        receiver.stop()
    assert [backoff(n).total_seconds() for n in (1, 2, 3, 20)] == [10, 20, 40, 3600]


@pytest.mark.usefixtures("loopback_allowed")
def test_a_receiver_that_refuses_is_not_retried():
    receiver = Receiver(status=410).start()
    try:
        a_webhook(receiver.url)
        raise_finding()
        webhook_outbox_scan()
        delivery = Delivery.objects.get()
        assert delivery_attempt(delivery_id=delivery.pk) == "failed"
    finally:
        receiver.stop()


def test_old_finished_deliveries_are_pruned_and_owed_ones_kept(settings):
    from integrations.services.webhooks import deliveries_prune

    settings.ATLAS_WEBHOOK_RETENTION_DAYS = 30
    webhook = a_webhook("http://127.0.0.1:9/a")
    old = timezone.now() - timedelta(days=31)
    for status, created_at in [
        ("delivered", old),
        ("failed", old),
        ("pending", old),
        ("delivered", timezone.now()),
    ]:
        Delivery.objects.create(
            webhook=webhook,
            event="finding.raised",
            occurrence=Delivery.objects.count(),
            payload={},
            status=status,
            created_at=created_at,
        )
    assert deliveries_prune() == 2
    assert sorted(Delivery.objects.values_list("status", flat=True)) == ["delivered", "pending"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/webhooks/99999999999999999999/",
        "/api/v1/webhooks/99999999999999999999/deliveries/",
        "/api/v1/webhooks/abc/",
        "/api/v1/webhooks/12345/deliveries/",
    ],
)
def test_an_unknown_webhook_is_a_404(staff_api, path):
    assert staff_api.get(path).status_code == 404
