"""Counts the answers of the agents' reports endpoint, for `atlas_reports_received`.

A middleware reads only the answer (status code, the `status` of a 202), so the report
pipeline does not know metrics exist. Off while ATLAS_METRICS_TOKEN is unset; on, answers are
added up in memory and written every ATLAS_METRICS_FLUSH_S seconds (services/outcomes.py).
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from .services import report_outcome_count

REPORTS_PATH = "/api/v1/reports/"


class ReportOutcomeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            settings.ATLAS_METRICS_TOKEN
            and request.method == "POST"
            and request.path_info == REPORTS_PATH
        ):
            report_outcome_count(status_code=response.status_code, status=_answer_status(response))
        return response


def _answer_status(response: HttpResponse) -> str:
    data = getattr(response, "data", None)
    return str(data.get("status", "")) if isinstance(data, dict) else ""
