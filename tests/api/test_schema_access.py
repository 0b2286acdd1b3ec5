"""The OpenAPI schema and docs: signed-in people only, unless ATLAS_PUBLIC_API_SCHEMA is on."""

from __future__ import annotations

import pytest

from inventory.services import agent_token_create, user_token_create

pytestmark = pytest.mark.django_db


def test_anonymous_callers_get_401_for_the_schema_and_sign_in_for_the_docs(client):
    assert client.get("/api/schema/").status_code == 401
    assert client.get("/api/schema/?format=json").status_code == 401
    docs = client.get("/api/docs/")
    assert docs.status_code == 302 and docs["Location"] == "/login/?next=/api/docs/"
    assert client.get("/api/docs/?script=").status_code == 302


def test_people_read_both_with_a_session_or_a_token(client, user):
    _token, key = user_token_create(user=user)
    schema = client.get("/api/schema/?format=json", HTTP_AUTHORIZATION=f"Token {key}")
    assert schema.status_code == 200 and "/api/v1/servers/" in schema.json()["paths"]
    client.force_login(user)
    assert client.get("/api/schema/").status_code == 200
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and docs["Content-Type"].startswith("text/html")
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
    assert "/api/schema/" in script.content.decode()


def test_an_agent_token_does_not_open_the_schema(client):
    _token, key = agent_token_create(name="dgx-01")
    assert client.get("/api/schema/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 401


def test_the_setting_opens_both_to_anonymous_callers(client, settings):
    settings.ATLAS_PUBLIC_API_SCHEMA = True
    schema = client.get("/api/schema/?format=json")
    assert schema.status_code == 200 and "/api/v1/reports/" in schema.json()["paths"]
    assert client.get("/api/docs/").status_code == 200
    # The rest of the API stays closed.
    assert client.get("/api/v1/servers/").status_code == 401


def test_the_docs_page_carries_no_inline_script_or_style(client, user):
    client.force_login(user)
    page = client.get("/api/docs/").content.decode()
    assert "<style" not in page
    assert all("src=" in tag for tag in page.split("<script")[1:])


def test_the_schema_describes_token_authentication(client, user):
    client.force_login(user)
    schemes = client.get("/api/schema/?format=json").json()["components"]["securitySchemes"]
    assert schemes["tokenAuth"] == {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": 'Token-based authentication with required prefix "Token"',
    }
    assert "agentToken" in schemes


METHODS = ("get", "head", "options", "post", "put", "patch", "delete")


@pytest.mark.parametrize("method", METHODS)
def test_every_method_answers_anonymous_callers_as_get_does(client, method):
    """OPTIONS answered 200 with the view's metadata, an empty page to a browser; POST and
    the rest 405, saying the route exists. Now all of them: 401, or the sign-in redirect."""
    call = getattr(client, method)
    assert call("/api/schema/").status_code == 401
    assert call("/api/schema/?format=json").status_code == 401
    for url in ("/api/docs/", "/api/docs/?script="):
        docs = call(url)
        assert docs.status_code == 302, (method, url, docs.status_code)
        assert docs["Location"].startswith("/login/?next=/api/docs/")


@pytest.mark.parametrize("method", ("get", "head", "options"))
def test_the_setting_opens_every_reading_method(client, settings, method):
    settings.ATLAS_PUBLIC_API_SCHEMA = True
    call = getattr(client, method)
    assert call("/api/schema/").status_code == 200
    assert call("/api/docs/").status_code == 200
