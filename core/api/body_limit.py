"""One rule for request bodies: too large is refused before a byte of it is read (issue 26).

Every view that takes a body has a limit: its own `body_limit` (a `BodyLimit` naming the
setting that holds it), else ATLAS_API_BODY_MAX_BYTES. `BodyLimitMiddleware.process_view`
runs once the URL is resolved and before any view, parser or CSRF check reads the body: a
`Content-Length` over the limit is answered 413 at once, unread. A chunked body (no
`Content-Length`) is read up to the limit plus one byte: over it, 413; within it, the bytes
read become the body, so the view sees it as though its length had been sent.

An unread body leaves the connection unusable, so the answer must end it. WSGI forbids an
application's `Connection` header (wsgiref asserts, gunicorn drops it), hence
`close_after_refusal`, the WSGI wrapper in config/wsgi.py, which asks the server itself:
gunicorn's response then says `Connection: close` and closes.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.handlers.wsgi import LimitedStream
from django.http import HttpRequest, HttpResponse

REFUSED = "atlas.body_refused"  # set in the WSGI environ when a body was refused unread
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class BodyLimit:
    """A view's limit: the setting that holds it (read per request, so overrides apply) and
    what the refusal calls the body."""

    setting: str = "ATLAS_API_BODY_MAX_BYTES"
    detail: str = "body too large"

    @property
    def max_bytes(self) -> int:
        return int(getattr(settings, self.setting))


DEFAULT_LIMIT = BodyLimit()


def body_limit_of(view_func: Callable[..., Any]) -> BodyLimit:
    """The limit a view declares (`body_limit` on its class), else the default."""
    view_class = getattr(view_func, "view_class", None) or getattr(view_func, "cls", None)
    limit = getattr(view_class, "body_limit", None)
    return limit if isinstance(limit, BodyLimit) else DEFAULT_LIMIT


def too_large(limit: BodyLimit) -> HttpResponse:
    """The 413 in the API's error shape (`detail`, messages by field in `errors`)."""
    data = {"detail": limit.detail, "errors": {"body": [f"the limit is {limit.max_bytes} bytes"]}}
    response = HttpResponse(json.dumps(data), status=413, content_type="application/json")
    response.data = data  # type: ignore[attr-defined]  # as DRF's Response (answer counters)
    return response


class BodyLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        if request.method not in BODY_METHODS:
            return None
        limit = body_limit_of(view_func)
        length = request.META.get("CONTENT_LENGTH") or ""
        if length:
            if length.isdigit() and int(length) <= limit.max_bytes:
                return None
        elif "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
            if _read_chunked(request, limit.max_bytes):
                return None
        else:
            return None  # no body
        request.META[REFUSED] = True  # META is the WSGI environ
        return too_large(limit)


def _read_chunked(request: HttpRequest, max_bytes: int) -> bool:
    """Read a chunked body (the server has de-chunked `wsgi.input`) up to `max_bytes` + 1;
    within the limit it becomes the request's body. False when it is over."""
    stream = request.META["wsgi.input"]
    data = bytearray()
    while len(data) <= max_bytes:
        chunk = stream.read(min(_CHUNK, max_bytes + 1 - len(data)))
        if not chunk:
            break
        data += chunk
    if len(data) > max_bytes:
        return False
    request.META["CONTENT_LENGTH"] = str(len(data))
    request._stream = LimitedStream(io.BytesIO(bytes(data)), len(data))  # type: ignore[assignment]
    return True


WSGIApp = Callable[[dict, Callable[..., Any]], Iterable[bytes]]


def close_after_refusal(app: WSGIApp) -> WSGIApp:
    """`app`, asking the server to close the connection after a body refused unread.

    gunicorn's `start_response` is its response's bound method and `force_close()` makes it
    send `Connection: close`; a server without one (wsgiref, the dev server) drains the
    body itself."""

    def application(environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
        def start(status: str, headers: list, exc_info: Any = None) -> Any:
            if environ.get(REFUSED):
                server_response = getattr(start_response, "__self__", None)
                force_close = getattr(server_response, "force_close", None)
                if callable(force_close):
                    force_close()
            return start_response(status, headers, exc_info)

        return app(environ, start)

    return application
