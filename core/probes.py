"""`GET /healthz` and `GET /readyz`: the probes of a load balancer or of Kubernetes.

`/healthz` (liveness): the process answers, 200, touching nothing else. `/readyz`
(readiness): the database answers, no migration is pending, and the broker answers when one is
configured; 503 otherwise, with a JSON body naming each check's state. A check's failure is
named by its kind and the exception's class alone: never a message, which could hold a URL
with its password.

Both are answered by a middleware placed first, before SecurityMiddleware: the kubelet probes a
pod's IP over plain HTTP, which `DJANGO_ALLOWED_HOSTS` would refuse (400) and
`DJANGO_SECURE_SSL_REDIRECT` would redirect (301); and sessions, CSRF, authentication and the
Content-Security-Policy have nothing to do with a probe. Unauthenticated: they say nothing but
ok or not.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
BROKER_TIMEOUT_S = 2.0


def _json(status: int, body: dict[str, object]) -> HttpResponse:
    answer = HttpResponse(json.dumps(body), status=status, content_type="application/json")
    answer["Cache-Control"] = "no-store"
    return answer


def _failure(kind: str, exc: BaseException) -> str:
    return f"{kind} ({type(exc).__name__})"


def check_database() -> str | None:
    """None when the default database answers `SELECT 1`; else what went wrong."""
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver's error: the probe says not ready, never 500
        return _failure("unreachable", exc)
    return None


class _Migrations:
    """Pending migrations of the default database. Once none are pending the process says so
    without asking again: a running release's migrations are not unapplied under it, and the
    migration graph costs tens of milliseconds to load."""

    applied = False

    def check(self) -> str | None:
        if self.applied:
            return None
        try:
            executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
            pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        except Exception as exc:
            return _failure("unknown", exc)
        if pending:
            return f"{len(pending)} pending"
        self.applied = True
        return None


migrations = _Migrations()


def check_broker() -> str | None:
    """None when no broker is configured (tasks run in-process) or the broker answers."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return None
    from celery import current_app as app  # the project's (config/__init__.py loads it)

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=BROKER_TIMEOUT_S)
            if conn.transport.driver_type == "redis":  # a round trip proves it answers
                conn.default_channel.client.ping()
    except Exception as exc:
        return _failure("unreachable", exc)
    return None


def readiness() -> tuple[bool, dict[str, str]]:
    database = check_database()
    checks = {
        "database": database or "ok",
        # Without a database there is no telling what is applied.
        "migrations": (migrations.check() or "ok") if database is None else "unknown",
        "broker": check_broker() or ("ok" if not settings.CELERY_TASK_ALWAYS_EAGER else "none"),
    }
    return all(v in {"ok", "none"} for v in checks.values()), checks


class ProbeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        if path != HEALTH_PATH and path != READY_PATH:
            return self.get_response(request)
        if request.method not in {"GET", "HEAD"}:
            answer = _json(405, {"status": "method not allowed"})
            answer["Allow"] = "GET, HEAD"
            return answer
        if path == HEALTH_PATH:
            return _json(200, {"status": "ok"})
        ready, checks = readiness()
        return _json(
            200 if ready else 503, {"status": "ready" if ready else "not ready", "checks": checks}
        )
