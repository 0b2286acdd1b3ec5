"""Enrollment: one fleet secret traded once per server for a confined agent token."""

from __future__ import annotations

import io
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from agent.schema import report_digest
from inventory.models import AgentToken, Enrollment, EnrollmentToken, Server
from inventory.services import (
    agent_token_create,
    enrollment_token_create,
    enrollment_token_revoke,
    user_token_create,
)
from inventory.services.tokens import token_digest
from tests.heartbeats import UNKNOWN, digest_header, remember_heartbeats
from tests.reports import make_report

pytestmark = pytest.mark.django_db

ENROLL = "/api/v1/agents/enroll/"


def identity(hostname: str = "dgx-01", **extra) -> dict:
    return {
        "hostname": hostname,
        "system_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, hostname)),
        "machine_id": uuid.uuid5(uuid.NAMESPACE_DNS, hostname).hex,
        **extra,
    }


def enroll(client, key: str, body: dict | None = None):
    return client.post(
        ENROLL,
        data=body if body is not None else identity(),
        format="json",
        HTTP_AUTHORIZATION=f"Token {key}",
    )


@pytest.fixture
def client() -> APIClient:
    return APIClient()


def snapshot() -> tuple:
    """Everything an enrollment writes, to show a refusal wrote none of it."""
    return (
        list(EnrollmentToken.objects.values_list("pk", "uses", "revoked_at")),
        Enrollment.objects.count(),
        Server.objects.count(),
        list(AgentToken.objects.values_list("pk", "identity", "revoked_at")),
    )


def test_enrollment_issues_a_token_bound_to_a_new_server(client, post_report):
    token, key = enrollment_token_create(name="rack-a", uses=2)
    response = enroll(client, key, identity("dgx-01", kubernetes_node_name="node-a"))
    assert response.status_code == 201, response.content
    body = response.json()
    server = Server.objects.get(pk=body["server"])
    assert server.hostname == "dgx-01"
    agent = AgentToken.objects.get(key_hash=token_digest(body["token"]))
    assert body["token"].startswith("caa_") and agent.server == server
    assert agent.identity == server.identity and agent.revoked_at is None
    token.refresh_from_db()
    assert token.uses == 1
    (use,) = token.enrollments.all()
    assert (use.hostname, use.server, use.agent_token) == ("dgx-01", server, agent)
    assert use.kubernetes_node_name == "node-a" and use.remote_addr == "127.0.0.1"

    # its report is accepted for its own server, refused for another identity
    own = make_report("dgx-01", system_uuid=identity("dgx-01")["system_uuid"])
    assert post_report(own, body["token"]).status_code == 202
    assert Server.objects.count() == 1
    other = post_report(make_report("intruder"), body["token"])
    assert other.status_code == 403
    assert not Server.objects.filter(hostname="intruder").exists()


def test_an_identity_resolves_to_its_existing_server(client, post_report, agent_token):
    report = make_report("dgx-07", system_uuid=identity("dgx-07")["system_uuid"])
    post_report(report, agent_token)
    existing = Server.objects.get()
    AgentToken.objects.update(revoked_at=timezone.now())  # the old install's token is gone
    _token, key = enrollment_token_create(uses=1)
    response = enroll(client, key, {**identity("dgx-07"), "hostname": "DGX-07"})
    assert response.status_code == 201
    assert response.json()["server"] == existing.pk and Server.objects.count() == 1


def test_uses_are_counted_and_a_spent_token_changes_nothing(client):
    token, key = enrollment_token_create(uses=2)
    assert enroll(client, key, identity("a")).status_code == 201
    assert enroll(client, key, identity("b")).status_code == 201
    before = snapshot()
    spent = enroll(client, key, identity("c"))
    assert spent.status_code == 403 and "spent" in spent.json()["detail"]
    assert snapshot() == before
    token.refresh_from_db()
    assert token.uses == 2


def test_expired_and_revoked_tokens_are_refused_and_change_nothing(client):
    expired, expired_key = enrollment_token_create(uses=5, expires_in=timedelta(hours=1))
    EnrollmentToken.objects.filter(pk=expired.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    revoked, revoked_key = enrollment_token_create(uses=5)
    enrollment_token_revoke(token=revoked)
    before = snapshot()
    for key, word in ((expired_key, "expired"), (revoked_key, "revoked")):
        response = enroll(client, key)
        assert response.status_code == 403 and word in response.json()["detail"]
    assert snapshot() == before


def test_unknown_forged_and_other_kinds_of_token_get_401(client, user):
    _token, key = enrollment_token_create(uses=5)
    _agent, agent_key = agent_token_create(name="x")
    _person, user_key = user_token_create(user=user)
    before = snapshot()
    for bad in ("cae_unknown", key[:-2] + "xx", agent_key, user_key, "x" * 300):
        response = enroll(client, bad)
        assert response.status_code == 401, bad
        assert response["WWW-Authenticate"] == "Token"
    assert enroll(client, agent_key).json()["detail"].startswith("Not an enrollment token")
    assert client.post(ENROLL, data=identity(), format="json").status_code == 401
    assert snapshot() == before


def test_bad_bodies_get_field_errors(client):
    _token, key = enrollment_token_create(uses=5)
    response = enroll(client, key, {"system_uuid": "x" * 65})
    assert response.status_code == 400
    assert {"hostname", "system_uuid"} <= set(response.json())
    assert Enrollment.objects.count() == 0


def test_reenrollment_is_refused_then_allowed_and_revokes_the_old_token(client, post_report):
    _token, key = enrollment_token_create(uses=5)
    first = enroll(client, key).json()
    again = enroll(client, key)
    assert again.status_code == 409 and "already enrolled" in again.json()["detail"]
    assert AgentToken.objects.count() == 1

    _reinstall, reinstall_key = enrollment_token_create(uses=1, allow_reenroll=True)
    second = enroll(client, reinstall_key)
    assert second.status_code == 201
    assert second.json()["server"] == first["server"]
    old = AgentToken.objects.get(key_hash=token_digest(first["token"]))
    assert old.revoked_at is not None and old.identity is None
    assert AgentToken.objects.filter(revoked_at__isnull=True).count() == 1
    assert Enrollment.objects.get(token=_reinstall).replaced_token
    report = make_report("dgx-01", system_uuid=identity()["system_uuid"])
    assert post_report(report, first["token"]).status_code == 401
    assert post_report(report, second.json()["token"]).status_code == 202


def test_a_reenrollment_forgets_the_old_tokens_remembered_heartbeat_once_committed(
    client, post_report, settings, django_capture_on_commit_callbacks
):
    """With the web process's memory on (config/wsgi.py), the old token's remembered hit is
    forgotten when the re-enrollment commits, not before: its next heartbeat is then refused."""
    remember_heartbeats(settings)
    _token, key = enrollment_token_create(uses=2, allow_reenroll=True)
    old = enroll(client, key).json()["token"]
    report = make_report("dgx-01", system_uuid=identity()["system_uuid"])
    assert post_report(report, old).status_code == 202
    digest = digest_header(report_digest(report))
    assert post_report(b"", old, **digest).status_code == 200  # remembered from here on
    with django_capture_on_commit_callbacks() as on_commit:
        assert enroll(client, key).status_code == 201
    assert post_report(b"", old, **digest).status_code == 200  # the memory, until the commit
    for callback in on_commit:
        callback()
    answer = post_report(b"", old, **digest)
    assert answer.status_code == 401
    assert answer.json() == UNKNOWN


def test_staff_create_list_and_revoke_tokens_and_the_key_shows_once(staff, user):
    api = APIClient()
    api.force_authenticate(user)
    assert api.post("/api/v1/enrollment-tokens/", {"uses": 3}, format="json").status_code == 403
    assert api.get("/api/v1/enrollment-tokens/").status_code == 403
    api.force_authenticate(staff)
    created = api.post(
        "/api/v1/enrollment-tokens/", {"name": "rollout", "uses": 3, "expires": "2d"}, format="json"
    )
    assert created.status_code == 201, created.content
    key = created.json()["key"]
    assert key.startswith("cae_") and created.json()["created_by"] == "staff"
    bad = api.post("/api/v1/enrollment-tokens/", {"uses": 0, "expires": "soon"}, format="json")
    assert bad.status_code == 400 and {"uses", "expires"} <= set(bad.json())

    agent_client = APIClient()
    enrolled = enroll(agent_client, key, identity("dgx-09")).json()
    listed = api.get("/api/v1/enrollment-tokens/")
    assert key not in listed.content.decode() and enrolled["token"] not in listed.content.decode()
    (row,) = listed.json()["results"]
    assert (row["uses"], row["uses_allowed"], row["state"]) == (1, 3, "active")
    assert row["enrollments"][0]["hostname"] == "dgx-09"
    assert row["enrollments"][0]["server"] == enrolled["server"]

    revoked = api.post(f"/api/v1/enrollment-tokens/{row['id']}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"
    assert enroll(agent_client, key, identity("dgx-10")).status_code == 403
    assert key not in api.get(f"/api/v1/enrollment-tokens/{row['id']}/").content.decode()


def test_the_command_prints_the_key_last_and_once():
    out = io.StringIO()
    call_command(
        "createenrollmenttoken", "--uses", "50", "--expires", "7d", "--name", "fleet", stdout=out
    )
    line = out.getvalue().strip()
    key = line.split()[-1]
    assert key.startswith("cae_") and line.count(key) == 1 and "\n" not in line
    token = EnrollmentToken.objects.get(key_hash=token_digest(key))
    assert token.uses_allowed == 50 and not token.allow_reenroll
    assert timedelta(days=6, hours=23) < token.expires_at - timezone.now() <= timedelta(days=7)


def test_admin_pages_never_show_the_key(client, django_user_model):
    admin = django_user_model.objects.create_superuser("root", password="root-password-1")
    token, key = enrollment_token_create(uses=2)
    enroll(APIClient(), key)
    browser = APIClient()
    browser.force_login(admin)
    for url in (
        "/admin/inventory/enrollmenttoken/",
        f"/admin/inventory/enrollmenttoken/{token.pk}/change/",
    ):
        page = browser.get(url)
        assert page.status_code == 200
        assert key not in page.content.decode() and token.key_hash not in page.content.decode()
