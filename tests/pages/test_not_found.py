"""An unknown id or route: the app's own 404 page with its menu, DEBUG on or off; API: JSON."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("path", ["/servers/999999/", "/no-such-page/"])
def test_unknown_page_shows_the_apps_404_with_its_menu(signed_in, settings, debug, path):
    settings.DEBUG = debug
    response = signed_in.get(path)
    assert response.status_code == 404
    text = response.content.decode()
    assert 'id="not-found"' in text
    assert 'id="menu-layers"' in text and 'href="/servers/"' in text
    assert "Skip to content" in text
    assert "Traceback" not in text and "URLconf" not in text  # not Django's debug page


@pytest.mark.parametrize("debug", [False, True])
def test_typed_path_is_escaped_on_the_404_page(signed_in, settings, debug):
    settings.DEBUG = debug
    response = signed_in.get("/servers/<script>x</script>/")
    text = response.content.decode()
    assert response.status_code == 404
    assert "<script>x</script>" not in text


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("path", ["/api/v1/servers/999999/", "/api/v1/no-such-route/"])
def test_api_keeps_a_json_404(signed_in, settings, debug, path):
    settings.DEBUG = debug
    response = signed_in.get(path)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert "detail" in response.json()


def test_anonymous_404_offers_sign_in_not_the_menu(client, settings):
    settings.DEBUG = True
    response = client.get("/no-such-page/")
    text = response.content.decode()
    assert response.status_code == 404 and 'id="not-found"' in text
    assert 'id="menu-layers"' not in text and "/login/" in text
