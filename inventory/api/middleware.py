"""Agents' heartbeats answered ahead of the middleware a person's request needs.

Nearly all of an agent's traffic is heartbeats, and sessions, CSRF, authentication,
messages, static files and the Content-Security-Policy cost more than the heartbeat itself
(issue 11). This middleware sits right after SecurityMiddleware (so HTTPS redirects and HSTS
still apply) and answers `POST` to the reports endpoint when it is a heartbeat; anything else
goes down the whole stack to the DRF view, which keeps the endpoint's full contract.

A kept database connection is not health-checked first (DATABASE_CONN_HEALTH_CHECKS costs a
`SELECT 1` per request, as many round trips as the heartbeat itself): the heartbeat's
statements are idempotent (they set last_seen to now), so one that fails on a dropped
connection is run again on a new one, which keeps what the check is for (a dropped
connection replaced, not a 500).
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import Error, connection
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from .views import heartbeat_answer


class AgentHeartbeatMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.path: str | None = None

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST":
            if self.path is None:  # URLconf loaded by now: reversed once per process
                self.path = reverse("api:report-create")
            if request.path_info == self.path:
                answer = _unchecked(heartbeat_answer, request)
                if answer is not None:
                    return answer
        return self.get_response(request)


def _unchecked(answer: Callable[[HttpRequest], HttpResponse | None], request: HttpRequest):
    """`answer(request)` on the kept connection without its health check; once more on a
    new connection when the kept one turns out dropped. With health checks off, as Django
    does then: no retry.

    django-stubs leaves out the wrapper's `health_check_enabled` and `health_check_done`
    (instance attributes since Django 4.1's CONN_HEALTH_CHECKS): hence the ignores."""
    if not connection.health_check_enabled:  # type: ignore[attr-defined]
        return answer(request)
    checked, connection.health_check_done = connection.health_check_done, True  # type: ignore[attr-defined]
    try:
        return answer(request)
    except Error:
        if connection.in_atomic_block or connection.is_usable():
            raise  # not a dropped connection: the error is the answer's own
        connection.close()
        return answer(request)
    finally:
        connection.health_check_done = checked  # type: ignore[attr-defined]
