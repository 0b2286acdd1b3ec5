"""Counts the answers of the agents' reports endpoint, for `atlas_reports_received`.

A middleware reads only the answer (status code, the `status` of a 202), so the report
pipeline does not know metrics exist. Off (not a query more) while ATLAS_METRICS_TOKEN is
unset; on, one UPDATE per report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse

from .services import report_outcome_count

logger = logging.getLogger(__name__)

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
            try:
                report_outcome_count(
                    status_code=response.status_code, status=_answer_status(response)
                )
            except DatabaseError:  # a metric never costs an agent its answer
                logger.warning("metrics: report outcome not counted", exc_info=True)
        return response


def _answer_status(response: HttpResponse) -> str:
    data = getattr(response, "data", None)
    return str(data.get("status", "")) if isinstance(data, dict) else ""
