"""The app's own 404 page for pages, JSON for the API, in production and under `make run`.

Django's `handler404` renders `404.html` only when DEBUG is off; `make run` runs with
DEBUG=1, where an unknown server id showed Django's yellow debug page without the app's menu.
`NotFoundPageMiddleware` replaces that debug page on page routes with the same `404.html`,
so people see one page whatever the setting. API routes keep a JSON 404 (`{"detail": ...}`,
as DRF answers) in both cases; the admin and static files keep their own.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

NOT_FOUND_DETAIL = "Not found."
OWN_404_PREFIXES = ("/admin/", "/static/")
"""Routes whose 404 is not ours to replace."""


def is_api_path(path: str) -> bool:
    return path == "/api" or path.startswith("/api/")


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """`handler404`: JSON under /api/, else the app's page with its menu (never the path's
    text from the exception, which may echo what was typed)."""
    if is_api_path(request.path):
        return JsonResponse({"detail": NOT_FOUND_DETAIL}, status=404)
    return render(request, "404.html", {"path": request.path}, status=404)


class NotFoundPageMiddleware:
    """With DEBUG on, serve the app's 404 page instead of Django's debug page on page routes.

    Only HTML 404s are replaced: a view that answers 404 with JSON or text keeps its answer.
    With DEBUG off it does nothing (`handler404` already renders the page).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            settings.DEBUG
            and response.status_code == 404
            and response.get("Content-Type", "").startswith("text/html")
            and not request.path.startswith(OWN_404_PREFIXES)
        ):
            return page_not_found(request)
        return response
