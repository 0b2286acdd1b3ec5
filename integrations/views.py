"""`GET /metrics`: the Prometheus text format, behind a bearer token.

Off (404, as if absent) while ATLAS_METRICS_TOKEN is unset. A missing or wrong token gets
401 with `WWW-Authenticate: Bearer` (the same answer for both, so it tells nothing), never
403: the caller is unauthenticated, not a known caller without the right.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from .metrics import registry


def bearer_token_matches(header: str, token: str) -> bool:
    """Whether an Authorization header carries `Bearer <token>` (constant-time compare)."""
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given:
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.ATLAS_METRICS_TOKEN
    if not token:
        raise Http404("metrics are off")
    if not bearer_token_matches(request.headers.get("Authorization", ""), token):
        response = HttpResponse("401 unauthorized: a bearer token is required\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        response["Content-Type"] = "text/plain; charset=utf-8"
        return response
    # The classic text format: every Prometheus 2.x reads it (names here are all legacy-valid).
    response = HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_PLAIN_0_0_4)
    response["Cache-Control"] = "no-store"
    return response
