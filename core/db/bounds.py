"""Bounds on the database work of web requests, and what a request answers when it meets them.

The statement timeout (ATLAS_DB_STATEMENT_TIMEOUT_MS) is a property of the web process, not
of a request: `config/wsgi.py` (gunicorn's app module, and runserver's) calls
`enable_for_web()`, and every PostgreSQL connection that process opens starts with
`SET statement_timeout`, and with JIT compilation off. Celery workers, beat and management
commands never import config.wsgi, so their long passes never meet it; a flag in the process
(not an environment variable, which children would inherit) is what keeps it there. A session
setting also needs no transaction (ATOMIC_REQUESTS is off, so `SET LOCAL` would be a no-op) and
costs no query per request on a kept connection. SQLite ignores it.

JIT is off for web requests because a page's queries are short and their plans' cost estimates
are not: at 13k nodes the GPU page's count of GPUs needing action (20,000 rows read, none
found) spent 3.3 s of its 3.4 s compiling itself (bench/lists.py); no web query ran faster
with it. Long passes in workers keep PostgreSQL's default.

`unavailable(exc)` says whether an exception means "try again later": a statement that ran
past the timeout (SQLSTATE 57014, psycopg's QueryCanceled) or a database that is away
(OperationalError / InterfaceError on connect or mid-request, e.g. a terminated backend).
Both answer 503 with Retry-After, never a 500 (core/api/errors.py for the API, `server_error`
for everything else).
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.views.defaults import server_error as django_server_error

log = logging.getLogger(__name__)

QUERY_CANCELED = "57014"
"""PostgreSQL's SQLSTATE for a statement cancelled by statement_timeout (or by hand)."""
DATABASE_AWAY_RETRY_AFTER_S = 5
TIMEOUT_RETRY_AFTER_S = 30
"""A query that ran out of time will likely do so again at once: come back later."""

_web_process = False


def enable_for_web() -> None:
    """Mark this process as a web process: its new connections get the statement timeout."""
    global _web_process
    _web_process = True


def disable_for_web() -> None:
    """Tests only: undo `enable_for_web`."""
    global _web_process
    _web_process = False


@receiver(connection_created)
def _apply_statement_timeout(sender, connection: BaseDatabaseWrapper, **kwargs) -> None:
    if not _web_process or connection.vendor != "postgresql":
        return
    timeout_ms = int(settings.ATLAS_DB_STATEMENT_TIMEOUT_MS)
    with connection.cursor() as cursor:
        if timeout_ms > 0:  # 0 or less: the server's own timeout stays
            # One round trip; set_config takes its values as parameters, unlike SET.
            cursor.execute(
                "SELECT set_config('statement_timeout', %s, false),"
                " set_config('jit', 'off', false)",
                [str(timeout_ms)],
            )
        else:
            cursor.execute("SET jit = off")


@dataclass(frozen=True)
class Unavailable:
    detail: str
    retry_after_s: int


def unavailable(exc: BaseException | None) -> Unavailable | None:
    """What a database error tells the client, or None for any other exception."""
    if not isinstance(exc, OperationalError | InterfaceError):
        return None
    if getattr(exc.__cause__, "sqlstate", None) == QUERY_CANCELED:
        return Unavailable(
            "The database took too long to answer this request; try again later, or narrow "
            "it (filters, a smaller page).",
            TIMEOUT_RETRY_AFTER_S,
        )
    return Unavailable(
        "The database is unavailable; try again in a moment.", DATABASE_AWAY_RETRY_AFTER_S
    )


def unavailable_response(request: HttpRequest, reason: Unavailable) -> HttpResponse:
    """JSON under /api/, else the standalone 503 page (no template that reads the database:
    the session, the user, the menu's counts would fail again)."""
    if request.path == "/api" or request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"detail": reason.detail}, status=503)
    else:
        html = loader.get_template("503.html").render({"detail": reason.detail})
        response = HttpResponse(html, status=503)
    response["Retry-After"] = str(reason.retry_after_s)
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """`handler500`: a database that is away or too slow is a 503 with Retry-After; any other
    error is Django's 500 page (templates/500.html). Called inside Django's exception handling,
    so sys.exc_info() holds the exception."""
    reason = unavailable(sys.exc_info()[1])
    if reason is None:
        return django_server_error(request)
    return unavailable_response(request, reason)
