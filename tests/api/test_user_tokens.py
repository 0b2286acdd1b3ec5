"""People's API tokens: stored as a digest, shown once, `Authorization: Token` as before."""

from __future__ import annotations

import importlib
import io
from types import SimpleNamespace

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from inventory.models import UserToken
from inventory.services import (
    agent_token_authenticate,
    agent_token_create,
    user_token_authenticate,
    user_token_create,
    user_token_revoke,
)
from inventory.services.tokens import token_digest

pytestmark = pytest.mark.django_db


def read(client, key):
    return client.get("/api/v1/servers/", HTTP_AUTHORIZATION=f"Token {key}")


def test_a_person_token_reads_the_api_as_its_user(client, user):
    _token, key = user_token_create(user=user, name="cron")
    response = read(client, key)
    assert response.status_code == 200
    assert response.json()["count"] == 0


def test_only_the_digest_and_a_prefix_are_stored(user):
    token, key = user_token_create(user=user)
    assert key.startswith("cau_") and len(key) > 40
    row = UserToken.objects.values().get(pk=token.pk)
    assert row["key_hash"] == token_digest(key) != key
    assert row["prefix"] == key[:10]
    assert not any(key in str(value) for value in row.values())


@pytest.mark.parametrize("key", ["cau_unknown", "", "x" * 201])
def test_unknown_keys_get_401(client, user, key):
    user_token_create(user=user)
    assert read(client, key).status_code == 401


def test_a_revoked_token_or_an_inactive_user_gets_401(client, user, django_user_model):
    token, key = user_token_create(user=user)
    user_token_revoke(token=token)
    assert read(client, key).status_code == 401

    other = django_user_model.objects.create_user("gone", password="gone-password-1")
    _token, other_key = user_token_create(user=other)
    assert read(client, other_key).status_code == 200
    other.is_active = False
    other.save()
    assert read(client, other_key).status_code == 401


def test_last_use_is_recorded_without_a_write_on_every_call(client, user):
    token, key = user_token_create(user=user)
    read(client, key)
    first = UserToken.objects.get(pk=token.pk).last_used_at
    assert first is not None
    with CaptureQueriesContext(connection) as queries:
        read(client, key)
    assert not [q for q in queries.captured_queries if q["sql"].startswith("UPDATE")]
    UserToken.objects.filter(pk=token.pk).update(
        last_used_at=timezone.now() - timezone.timedelta(minutes=5)
    )
    read(client, key)
    assert UserToken.objects.get(pk=token.pk).last_used_at > first


def test_createapitoken_prints_the_key_once_and_it_works(client, user):
    out = io.StringIO()
    call_command("createapitoken", user.username, "--name", "snapshot cron", stdout=out)
    key = out.getvalue().split()[-1]
    assert read(client, key).status_code == 200
    token = UserToken.objects.get()
    assert token.name == "snapshot cron" and token.user == user
    with pytest.raises(CommandError, match="no user"):
        call_command("createapitoken", "nobody", stdout=io.StringIO())


def test_the_admin_shows_a_new_key_once_and_never_again(admin_client, admin_user, client):
    response = admin_client.post(
        "/admin/inventory/usertoken/add/",
        {"user": admin_user.pk, "name": "laptop"},
        follow=True,
    )
    assert response.status_code == 200
    token = UserToken.objects.get(name="laptop")
    shown = [str(m) for m in response.context["messages"]]
    key = shown[0].split()[-1]
    assert key.startswith(token.prefix) and token_digest(key) == token.key_hash
    assert read(client, key).status_code == 200

    for path in (
        "/admin/inventory/usertoken/",
        f"/admin/inventory/usertoken/{token.pk}/change/",
    ):
        page = admin_client.get(path).content.decode()
        assert token.prefix in page and key not in page and token.key_hash not in page


def test_staff_mint_tokens_only_for_themselves(client, staff, admin_user):
    from django.contrib.auth.models import Permission

    staff.user_permissions.add(
        *Permission.objects.filter(codename__in=["add_usertoken", "view_usertoken"])
    )
    user_token_create(user=admin_user, name="the admin's")
    client.force_login(staff)
    listing = client.get("/admin/inventory/usertoken/").content.decode()
    assert "the admin&#x27;s" not in listing and "the admin's" not in listing
    client.post("/admin/inventory/usertoken/add/", {"user": admin_user.pk, "name": "borrowed"})
    assert not UserToken.objects.filter(name="borrowed").exists()
    client.post("/admin/inventory/usertoken/add/", {"user": staff.pk, "name": "mine"})
    assert UserToken.objects.get(name="mine").user == staff


def test_upgrade_hashes_the_plain_drf_keys_and_they_keep_working(client, user):
    """The migration reads rest_framework.authtoken's table, keeps digests, empties it."""
    migration = importlib.import_module("inventory.migrations.0002_user_token")
    legacy_key = "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"  # a DRF key: 40 hex digits
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, user_id integer)"
        )
        cursor.execute(
            "INSERT INTO authtoken_token (key, user_id) VALUES (%s, %s)", [legacy_key, user.pk]
        )
    from django.apps import apps

    migration.hash_legacy_drf_tokens(apps, SimpleNamespace(connection=connection))

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0  # no key left in clear text
    token = UserToken.objects.get()
    assert token.user == user and token.key_hash == token_digest(legacy_key)
    assert read(client, legacy_key).status_code == 200


def test_upgrade_without_the_old_table_does_nothing():
    from django.apps import apps

    migration = importlib.import_module("inventory.migrations.0002_user_token")
    migration.hash_legacy_drf_tokens(apps, SimpleNamespace(connection=connection))
    assert not UserToken.objects.exists()


def test_a_person_token_is_found_in_one_query(user, django_assert_num_queries):
    """As `user_token_authenticate` promises; a use worth recording adds its one UPDATE."""
    token, key = user_token_create(user=user)
    with django_assert_num_queries(2):  # the lookup, then the first use recorded
        assert user_token_authenticate(key).pk == token.pk
    with django_assert_num_queries(1):
        assert user_token_authenticate(key).user == user


def test_an_agent_token_is_found_with_its_server_in_one_query(django_assert_num_queries):
    token, key = agent_token_create(name="dgx-01")
    with django_assert_num_queries(1):
        found = agent_token_authenticate(key)
        assert found.pk == token.pk and found.server is None  # select_related: no 2nd query
