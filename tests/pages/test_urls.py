"""Pages and the API have URL names of their own: a page link never leads to /api/."""

from __future__ import annotations

from collections import Counter

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

# The menu and the links in the tables: each name must give the page, not the API route.
PAGES = {
    "overview": "/",
    "server-list": "/servers/",
    "gpu-list": "/gpus/",
    "node-list": "/nodes/",
    "finding-list": "/findings/",
    "topology": "/topology/",
    "placement": "/placement/",
    "login": "/login/",
    "logout": "/logout/",
}


def named_routes() -> list[tuple[str, str]]:
    """(`namespace:name`, route prefix) for every named URL pattern of the project."""
    found: list[tuple[str, str]] = []

    def walk(patterns, namespace: str, prefix: str) -> None:
        for entry in patterns:
            route = prefix + str(entry.pattern)
            if isinstance(entry, URLResolver):
                inner = entry.namespace or ""
                walk(entry.url_patterns, f"{namespace}:{inner}".strip(":"), route)
            elif isinstance(entry, URLPattern) and entry.name:
                found.append((f"{namespace}:{entry.name}".strip(":"), route))

    walk(get_resolver().url_patterns, "", "")
    return found


@pytest.mark.parametrize(("name", "path"), PAGES.items())
def test_page_names_reverse_to_the_pages(name, path):
    assert reverse(name) == path


def test_server_detail_page_name_gives_the_page():
    assert reverse("server-detail", args=[7]) == "/servers/7/"
    assert reverse("api:server-detail", args=[7]) == "/api/v1/servers/7/"


def test_no_name_outside_the_api_namespace_leads_to_the_api():
    leaking = [
        (name, route)
        for name, route in named_routes()
        if not name.startswith("api:") and route.startswith("api/")
    ]
    assert leaking == []


def test_every_api_route_is_in_the_api_namespace():
    routes = named_routes()
    api = [(name, route) for name, route in routes if name.startswith("api:")]
    assert all(route.startswith("api/") for _name, route in api), api
    # The routers' names are all there, under the namespace.
    names = {name for name, _route in api}
    for expected in ("server-list", "gpu-list", "node-list", "finding-list", "figure-detail"):
        assert f"api:{expected}" in names


def test_no_url_name_is_defined_twice():
    counts = Counter(name for name, _route in named_routes())
    assert [name for name, n in counts.items() if n > 1] == []
