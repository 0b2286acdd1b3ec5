"""Webhooks never reach inside the network (issue 26, item 5): every forbidden range refused
when saved (API and page) and at each delivery (a name that comes to resolve to 127.0.0.1),
the allow-list admitting a receiver inside, the checked address pinned, no redirect
followed, the queue bounded, a webhook failing for its whole retry window disabled."""

from __future__ import annotations

import ipaddress
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from findings.models import Finding
from integrations.choices import DeliveryStatus
from integrations.destinations import address_refusal, allowed_networks
from integrations.models import Delivery, Webhook
from integrations.services.webhooks import delivery_attempt, post_pinned, webhook_outbox_scan
from integrations.signing import signature_valid
from tests.integrations.receiver import Receiver

pytestmark = pytest.mark.django_db

SECRET = "s3cret-for-signing-0123456789"

# One address of each forbidden kind, as it would be written in a URL's host.
FORBIDDEN = [
    ("127.0.0.1", "loopback"),
    ("127.8.9.10", "loopback"),
    ("[::1]", "loopback"),
    ("169.254.169.254", "link-local"),  # the cloud metadata service
    ("[fe80::1]", "link-local"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.254", "private"),
    ("192.168.1.1", "private"),
    ("[fc00::1]", "private"),
    ("[fd12:3456::1]", "private"),
    ("100.64.0.1", "private"),  # carrier-grade NAT
    ("100.127.255.254", "private"),
    ("224.0.0.1", "multicast"),
    ("[ff02::1]", "multicast"),
    ("0.0.0.0", "unspecified"),
    ("[::]", "unspecified"),
    ("240.0.0.1", "reserved"),
    ("[::ffff:127.0.0.1]", "loopback"),  # IPv4-mapped IPv6
    ("[::ffff:169.254.169.254]", "link-local"),
    ("[::ffff:10.0.0.1]", "private"),
]


def body(url: str) -> dict:
    return {"url": url, "secret": SECRET, "events": ["finding.raised"]}


def raise_finding(n: int = 0) -> Finding:
    return Finding.objects.create(
        type="unhealthy_gpu", severity="critical", subject=f"server:dgx-{n}", message=f"gpu {n}"
    )


def a_webhook(url: str) -> Webhook:
    return Webhook.objects.create(
        url=url,
        secret=SECRET,
        events=["finding.raised"],
        created_at=timezone.now() - timedelta(seconds=1),
    )


# The rule ------------------------------------------------------------------------------


@pytest.mark.parametrize(("host", "kind"), FORBIDDEN)
def test_each_forbidden_range_is_refused_by_the_rule(host, kind):
    reason = address_refusal(ipaddress.ip_address(host.strip("[]")))
    assert reason is not None and kind in reason


@pytest.mark.parametrize("host", ["93.184.216.34", "8.8.8.8", "2606:2800:220:1::1"])
def test_public_addresses_are_allowed(host):
    assert address_refusal(ipaddress.ip_address(host)) is None


def test_the_allow_list_admits_only_its_ranges():
    allowed = allowed_networks(" 10.20.0.0/16, fd00::/8 ,")
    assert address_refusal(ipaddress.ip_address("10.20.3.4"), allowed=allowed) is None
    assert address_refusal(ipaddress.ip_address("fd00::5"), allowed=allowed) is None
    assert address_refusal(ipaddress.ip_address("::ffff:10.20.3.4"), allowed=allowed) is None
    assert address_refusal(ipaddress.ip_address("10.21.0.1"), allowed=allowed) is not None
    assert address_refusal(ipaddress.ip_address("127.0.0.1"), allowed=allowed) is not None


# Refused when saved ----------------------------------------------------------------------


@pytest.mark.parametrize(("host", "kind"), FORBIDDEN)
def test_each_forbidden_range_is_a_400_on_url_from_the_api(staff_api, host, kind):
    response = staff_api.post("/api/v1/webhooks/", body(f"http://{host}:8080/x"), format="json")
    assert response.status_code == 400
    [message] = response.json()["url"]  # field-level, as DRF answers a serializer's errors
    assert kind in message and "ATLAS_WEBHOOK_ALLOWED_NETWORKS" in message
    assert SECRET not in response.content.decode()
    assert not Webhook.objects.exists()


@pytest.mark.parametrize(("host", "kind"), FORBIDDEN)
def test_each_forbidden_range_is_refused_by_the_page(client, staff, host, kind):
    client.force_login(staff)
    response = client.post("/webhooks/new/", body(f"https://{host}/x"))
    assert response.status_code == 200
    [message] = response.context["form"].errors["url"]
    assert kind in message
    assert SECRET not in response.content.decode()
    assert not Webhook.objects.exists()


@pytest.mark.parametrize(
    ("answers", "said"),
    [
        (["127.0.0.1"], "hooks.corp.example resolves to 127.0.0.1 is a loopback address"),
        (["93.184.216.34", "10.0.0.7"], "resolves to 10.0.0.7 is a private address"),
        ([], "hooks.corp.example does not resolve"),
    ],
)
def test_a_name_resolving_inside_or_nowhere_is_refused(
    staff_api, client, staff, dns, answers, said
):
    dns["hooks.corp.example"] = answers
    url = "https://hooks.corp.example/atlas"
    response = staff_api.post("/api/v1/webhooks/", body(url), format="json")
    assert response.status_code == 400 and said in json.dumps(response.json())
    client.force_login(staff)
    page = client.post("/webhooks/new/", body(url))
    assert page.status_code == 200 and said in page.context["form"].errors["url"][0]
    assert not Webhook.objects.exists()


def test_localhost_is_refused(staff_api):
    response = staff_api.post("/api/v1/webhooks/", body("http://localhost:9/x"), format="json")
    assert response.status_code == 400 and "loopback" in json.dumps(response.json())


def test_changing_the_url_to_inside_is_refused(staff_api):
    created = staff_api.post("/api/v1/webhooks/", body("https://hooks.example.org/"), format="json")
    assert created.status_code == 201
    path = f"/api/v1/webhooks/{created.json()['id']}/"
    patched = staff_api.patch(path, {"url": "http://169.254.169.254/latest/"}, format="json")
    assert patched.status_code == 400 and "link-local" in json.dumps(patched.json())
    assert Webhook.objects.get().url == "https://hooks.example.org/"


def test_the_allow_list_admits_a_receiver_inside_when_saved(staff_api, loopback_allowed):
    response = staff_api.post("/api/v1/webhooks/", body("http://127.0.0.1:9/x"), format="json")
    assert response.status_code == 201


# At delivery ---------------------------------------------------------------------------


def test_a_name_that_comes_to_resolve_to_loopback_is_refused_at_delivery(staff_api, dns):
    receiver = Receiver().start()  # something inside that must not be reached
    try:
        url = f"http://rebind.example:{receiver.port}/hook"
        created = staff_api.post("/api/v1/webhooks/", body(url), format="json")
        assert created.status_code == 201  # it resolved outside then
        Webhook.objects.update(created_at=timezone.now() - timedelta(seconds=1))
        dns["rebind.example"] = ["127.0.0.1"]
        raise_finding()
        raise_finding(1)
        webhook_outbox_scan()
        first, second = Delivery.objects.order_by("id")
        assert delivery_attempt(delivery_id=first.pk) == DeliveryStatus.FAILED  # not retried
        assert receiver.received == []
    finally:
        receiver.stop()
    first.refresh_from_db()
    assert first.last_error.startswith("refused: rebind.example resolves to 127.0.0.1")
    webhook = Webhook.objects.get()
    assert not webhook.active and webhook.disabled_at is not None
    assert "loopback" in webhook.disabled_reason
    second.refresh_from_db()
    assert second.status == DeliveryStatus.FAILED  # disabled: nothing more is sent
    shown = staff_api.get(f"/api/v1/webhooks/{webhook.pk}/").json()
    assert shown["active"] is False and "loopback" in shown["disabled_reason"]
    assert shown["disabled_at"]


def test_the_allow_list_admits_a_receiver_inside_and_it_gets_the_signed_delivery(
    dns, loopback_allowed
):
    receiver = Receiver().start()
    try:
        dns["hooks.internal"] = ["127.0.0.1"]
        a_webhook(f"http://hooks.internal:{receiver.port}/hook")
        raise_finding()
        webhook_outbox_scan()
        assert delivery_attempt(delivery_id=Delivery.objects.get().pk) == "delivered"
        [got] = receiver.received
    finally:
        receiver.stop()
    headers = {k.lower(): v for k, v in got.headers.items()}
    assert signature_valid(got.body, SECRET, headers["x-atlas-signature"])
    assert headers["host"] == f"hooks.internal:{receiver.port}"  # the URL's own name
    assert got.path == "/hook"


def test_the_connection_goes_to_the_checked_address_not_a_new_answer(dns):
    """The name no longer resolves at all: only the pinned address can have been used."""
    receiver = Receiver().start()
    try:
        dns["gone.example"] = []
        status = post_pinned(
            f"http://gone.example:{receiver.port}/hook?x=1",
            address=ipaddress.ip_address("127.0.0.1"),
            body=b"{}",
            headers={"Content-Type": "application/json"},
            timeout=5,
        )
        assert status == 204
        [got] = receiver.received
        assert got.path == "/hook?x=1" and got.headers["Host"] == f"gone.example:{receiver.port}"
    finally:
        receiver.stop()


@pytest.mark.usefixtures("loopback_allowed")
def test_a_redirect_is_not_followed():
    inside = Receiver().start()
    redirecting = Receiver(status=302, headers={"Location": inside.url}).start()
    try:
        a_webhook(redirecting.url)
        raise_finding()
        webhook_outbox_scan()
        delivery = Delivery.objects.get()
        assert delivery_attempt(delivery_id=delivery.pk) == DeliveryStatus.FAILED
        assert len(redirecting.received) == 1 and inside.received == []
    finally:
        inside.stop()
        redirecting.stop()
    delivery.refresh_from_db()
    assert delivery.response_status == 302
    assert delivery.last_error == "HTTP 302 from the receiver: redirects are not followed"


# Bounded and disabled ------------------------------------------------------------------


def test_the_queue_keeps_the_newest_pending_deliveries(settings, client, staff):
    settings.ATLAS_WEBHOOK_MAX_PENDING = 3
    webhook = a_webhook("https://hooks.example.org/")
    findings = [raise_finding(n) for n in range(5)]
    webhook_outbox_scan()
    pending = Delivery.objects.filter(status=DeliveryStatus.PENDING)
    assert sorted(pending.values_list("finding_id", flat=True)) == [f.pk for f in findings[2:]]
    dropped = Delivery.objects.filter(status=DeliveryStatus.FAILED)
    assert sorted(dropped.values_list("finding_id", flat=True)) == [f.pk for f in findings[:2]]
    assert all("dropped" in e for e in dropped.values_list("last_error", flat=True))
    webhook.refresh_from_db()
    assert webhook.dropped_deliveries == 2
    raise_finding(9)
    webhook_outbox_scan()
    webhook.refresh_from_db()
    assert webhook.dropped_deliveries == 3
    assert Delivery.objects.filter(status=DeliveryStatus.PENDING).count() == 3
    client.force_login(staff)
    page = client.get(f"/webhooks/{webhook.pk}/").content.decode()
    assert "3 oldest pending deliveries dropped" in page


@pytest.mark.usefixtures("loopback_allowed")
def test_a_webhook_failing_for_its_whole_window_is_disabled_and_staff_turn_it_on(
    settings, client, staff, staff_api
):
    settings.ATLAS_WEBHOOK_RETRY_WINDOW_S = 60
    receiver = Receiver(status=503).start()
    try:
        webhook = a_webhook(receiver.url)
        raise_finding()
        webhook_outbox_scan()
        delivery = Delivery.objects.get()
        now = timezone.now()
        for wait, expected in [(0, "pending"), (10, "pending"), (20, "failed")]:
            now += timedelta(seconds=wait)
            assert delivery_attempt(delivery_id=delivery.pk, now=now) == expected
            webhook.refresh_from_db()
            assert webhook.active is (expected == "pending")
    finally:
        receiver.stop()
    assert webhook.disabled_at == now
    assert webhook.disabled_reason == (
        "nothing delivered for its whole retry window (60 s); last: HTTP 503 from the receiver"
    )
    raise_finding(1)
    webhook_outbox_scan()
    assert Delivery.objects.count() == 1  # off: no new deliveries
    client.force_login(staff)
    page = client.get(f"/webhooks/{webhook.pk}/").content.decode()
    assert "disabled" in page and "whole retry window" in page
    # Staff turn it on again: the reason goes.
    patched = staff_api.patch(f"/api/v1/webhooks/{webhook.pk}/", {"active": True}, format="json")
    assert patched.status_code == 200
    assert (patched.json()["disabled_at"], patched.json()["disabled_reason"]) == (None, "")
    assert Webhook.objects.get().active


@pytest.mark.usefixtures("loopback_allowed")
def test_a_webhook_that_delivered_within_the_window_stays_on(settings):
    settings.ATLAS_WEBHOOK_RETRY_WINDOW_S = 60
    receiver = Receiver(status=503).start()
    try:
        webhook = a_webhook(receiver.url)
        raise_finding()
        webhook_outbox_scan()
        delivery = Delivery.objects.get()
        Delivery.objects.create(
            webhook=webhook,
            event="finding.raised",
            occurrence=7,
            payload={},
            status=DeliveryStatus.DELIVERED,
            delivered_at=timezone.now(),
        )
        now = timezone.now() + timedelta(seconds=50)
        assert delivery_attempt(delivery_id=delivery.pk, now=now) == "failed"
    finally:
        receiver.stop()
    webhook.refresh_from_db()
    assert webhook.active and webhook.disabled_at is None


def test_staff_turn_a_disabled_webhook_on_from_its_page(client, staff):
    webhook = a_webhook("https://hooks.example.org/")
    Webhook.objects.update(active=False, disabled_at=timezone.now(), disabled_reason="why")
    client.force_login(staff)
    data = {"url": webhook.url, "events": ["finding.raised"], "secret": "", "active": "on"}
    assert client.post(f"/webhooks/{webhook.pk}/edit/", data).status_code == 302
    webhook.refresh_from_db()
    assert webhook.active and webhook.disabled_at is None and webhook.disabled_reason == ""


def test_a_name_that_stops_resolving_is_retried_not_refused(dns, settings):
    """DNS down for a while is an outage, not an attack: retried, the webhook stays on."""
    a_webhook("https://flaky.example/hook")
    raise_finding()
    webhook_outbox_scan()
    dns["flaky.example"] = []
    delivery = Delivery.objects.get()
    assert delivery_attempt(delivery_id=delivery.pk) == DeliveryStatus.PENDING
    delivery.refresh_from_db()
    assert delivery.last_error == "flaky.example does not resolve to an address"
    assert Webhook.objects.get().active


@pytest.fixture
def tls_receiver(tmp_path, monkeypatch):
    """An https receiver on 127.0.0.1 whose certificate names only `hooks.tls.example`,
    trusted through the bundle the sender uses."""
    import http.server
    import ssl
    import subprocess
    import threading

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=hooks.tls.example"),
            *("-addext", "subjectAltName=DNS:hooks.tls.example"),
        ],
        check=True,
        capture_output=True,
    )
    seen: list[tuple[str, str | None]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((self.headers["Host"], sni.get("name")))
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    sni: dict[str, str | None] = {}
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, ctx: sni.update(name=name)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr("integrations.services.webhooks.ca_bundle", lambda: str(cert))
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


def test_https_to_the_pinned_address_checks_the_urls_name(tls_receiver):
    import urllib3

    port, seen = tls_receiver
    pinned = {
        "address": ipaddress.ip_address("127.0.0.1"),
        "body": b"{}",
        "headers": {},
        "timeout": 5,
    }
    assert post_pinned(f"https://hooks.tls.example:{port}/hook", **pinned) == 204
    assert seen == [(f"hooks.tls.example:{port}", "hooks.tls.example")]  # Host and SNI
    with pytest.raises(urllib3.exceptions.SSLError):  # the certificate is not for this name
        post_pinned(f"https://other.example:{port}/hook", **pinned)


def test_the_admin_refuses_a_receiver_inside(client, django_user_model):
    admin = django_user_model.objects.create_superuser("root", password="x-0123456789")
    client.force_login(admin)
    data = {"url": "http://169.254.169.254/latest/", "events": '["finding.raised"]'}
    response = client.post("/admin/integrations/webhook/add/", data)
    assert response.status_code == 200 and "link-local" in response.content.decode()
    assert not Webhook.objects.exists()
