"""Agents' heartbeats answered ahead of the middleware a person's request needs.

Nearly all of an agent's traffic is heartbeats, and sessions, CSRF, authentication,
messages, static files and the Content-Security-Policy cost more than the heartbeat itself
(issue 11). This middleware sits right after SecurityMiddleware (so HTTPS redirects and HSTS
still apply) and answers `POST` to the reports endpoint when it is a heartbeat; anything else
goes down the whole stack to the DRF view, which keeps the endpoint's full contract.
"""

from __future__ import annotations

from collections.abc import Callable

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
                answer = heartbeat_answer(request)
                if answer is not None:
                    return answer
        return self.get_response(request)
