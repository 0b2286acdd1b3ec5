"""Sending reports: HTTP POST with the agent token, retries with backoff, an on-disk spool.

- `Transport` POSTs one JSON body to `<url>/api/v1/reports/` with `Authorization: Token
  <key>`; TLS is verified (system CAs or `--ca-bundle`) unless `insecure` is asked for;
  redirects are refused, so the token never travels to another address.
- Outcomes are split: `TransientError` (backend unreachable, 5xx, 408, 429) is worth retrying;
  `PermanentError` (any other 4xx) is not, and carries the backend's own message.
- `Spool` keeps reports the backend could not take, one file each, written atomically
  (temporary file, fsync, rename), newest `max_reports` kept; replayed oldest first.
- `Sender.deliver` ties them together: replay the spool, then send the new report with
  exponential backoff and full jitter; when the backend stays away the report is spooled.

The token is never logged or printed: it only ever appears in the request header, and
`RedactingFilter` scrubs it from any log line that might echo it back.
"""

from __future__ import annotations

import json
import logging
import os
import random
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from http.client import HTTPException
from pathlib import Path
from typing import Any

from . import __version__

logger = logging.getLogger("agent.transport")

REPORTS_PATH = "/api/v1/reports/"


class DeliveryError(Exception):
    """A report was not delivered."""


class TransientError(DeliveryError):
    """Worth retrying: the backend is unreachable, overloaded or failing (5xx, 408, 429)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(DeliveryError):
    """Not worth retrying: the backend refused this report or this token (4xx)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def token_rejected(self) -> bool:
        return self.status in (401, 403)


def reports_url(url: str) -> str:
    """The reports endpoint for a backend URL given with or without a trailing slash, a path
    prefix (`https://host/atlas`) or the full endpoint path."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an http(s) URL: {url!r}")
    path = parts.path.rstrip("/")
    if not path.endswith(REPORTS_PATH.rstrip("/")):
        path = path + REPORTS_PATH.rstrip("/")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path + "/", "", ""))


def read_token(path: str | os.PathLike[str]) -> str:
    """The token from its file (first non-empty line). Raises ValueError naming the file only."""
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read token file {path}: {exc.strerror}") from exc
    token = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not token:
        raise ValueError(f"token file {path} is empty")
    return token


def read_tokens(path: str | os.PathLike[str]) -> list[str]:
    """One token per line (the simulator's file); blank lines and # comments skipped."""
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read token file {path}: {exc.strerror}") from exc
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


class RedactingFilter(logging.Filter):
    """Replaces secrets in every log record that passes (message and arguments)."""

    def __init__(self, *secrets: str) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            message = record.getMessage()
            for secret in self.secrets:
                message = message.replace(secret, "***")
            record.msg, record.args = message, ()
        return True


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises HTTPError with the 3xx status


def _error_message(status: int, body: bytes) -> str:
    """The backend's own words: DRF's {"detail": ...} or the report's {"errors": {...}}."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        if isinstance(data.get("errors"), dict):
            parts = []
            for field, messages in data["errors"].items():
                listed = messages if isinstance(messages, list) else [messages]
                parts.append(f"{field}: {' '.join(str(m) for m in listed)}")
            return "; ".join(parts)[:800]
        if "detail" in data:
            return str(data["detail"])[:800]
    return " ".join(text.split())[:300] or f"HTTP {status}"


def _retry_after(headers: Message | None) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class Transport:
    """POSTs reports to one backend with one token."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        ca_bundle: str | None = None,
        insecure: bool = False,
        timeout: float = 30.0,
    ) -> None:
        self.url = reports_url(url)
        self._token = token
        self.timeout = timeout
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
        if self.url.startswith("https:"):
            context = ssl.create_default_context(cafile=ca_bundle)
            if insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            handlers.append(urllib.request.HTTPSHandler(context=context))
        self._opener = urllib.request.build_opener(*handlers)

    def __repr__(self) -> str:  # never show the token, even in a traceback's locals
        return f"Transport(url={self.url!r})"

    def post(self, body: bytes) -> dict[str, Any]:
        """Send one report; the backend's JSON answer (`{"id": ..., "status": ...}`)."""
        request = urllib.request.Request(  # noqa: S310 - scheme checked in reports_url
            self.url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json",
                "Authorization": f"Token {self._token}",
                "User-Agent": f"cluster-atlas-agent/{__version__}",
            },
        )
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            status = exc.code
            body_text = exc.read() if exc.fp is not None else b""
            # a backend may echo the credential it refused; it must not reach our logs
            message = _error_message(status, body_text).replace(self._token, "***")
            if status >= 500 or status in (408, 429):
                raise TransientError(
                    f"backend answered {status}: {message}", retry_after=_retry_after(exc.headers)
                ) from None
            if 300 <= status < 400:
                location = exc.headers.get("Location") if exc.headers else None
                raise PermanentError(
                    f"backend redirected ({status}) to {location}; use that URL", status=status
                ) from None
            raise PermanentError(
                f"backend refused the report ({status}): {message}", status=status
            ) from None
        except (urllib.error.URLError, HTTPException, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ssl.SSLCertVerificationError):
                # retrying cannot fix trust: say what would
                raise PermanentError(
                    f"TLS certificate of {self.url} not trusted ({reason.verify_message}); "
                    "pass --ca-bundle with the CA that signed it"
                ) from None
            raise TransientError(f"backend unreachable at {self.url}: {reason}") from None
        try:
            answer = json.loads(payload or b"{}")
        except ValueError:
            answer = {}
        return answer if isinstance(answer, dict) else {}


class Spool:
    """Reports waiting for the backend: one file each, oldest first, at most `max_reports`."""

    SUFFIX = ".json"

    def __init__(self, directory: str | os.PathLike[str], max_reports: int = 100) -> None:
        if max_reports < 1:
            raise ValueError("the spool must hold at least one report")
        self.directory = Path(directory)
        self.max_reports = max_reports
        self._lock = threading.Lock()
        self._counter = 0
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)

    def put(self, body: bytes) -> Path:
        """Store a report atomically; drops the oldest beyond `max_reports`."""
        with self._lock:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)  # removed meanwhile?
            self._counter += 1
            name = f"{time.time_ns():020d}-{os.getpid()}-{self._counter:06d}{self.SUFFIX}"
            final = self.directory / name
            temp = self.directory / f".{name}.tmp"
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(body)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(temp, final)
            except BaseException:
                temp.unlink(missing_ok=True)
                raise
            self._fsync_directory()
            self._trim()
            return final

    def pending(self) -> list[Path]:
        """Spooled reports, oldest first (names sort by the time they were written)."""
        return sorted(
            p
            for p in self.directory.iterdir()
            if p.name.endswith(self.SUFFIX) and not p.name.startswith(".")
        )

    def remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def _trim(self) -> None:
        waiting = self.pending()
        for old in waiting[: max(0, len(waiting) - self.max_reports)]:
            logger.warning(
                "spool full (%d reports): dropping the oldest, %s", self.max_reports, old.name
            )
            old.unlink(missing_ok=True)

    def _fsync_directory(self) -> None:
        try:
            fd = os.open(self.directory, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)


@dataclass
class Backoff:
    """Exponential backoff with full jitter: attempt n waits uniform(0, min(cap, base*2**n))."""

    base: float = 2.0
    cap: float = 120.0
    rng: random.Random | None = None

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        ceiling = min(self.cap, self.base * (2**attempt))
        wait = (self.rng or random).uniform(0, ceiling)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.cap))
        return wait


@dataclass
class Delivery:
    """What happened to one report: "sent" (with the backend's answer), "spooled", or
    "lost" (the backend unreachable and the spool unwritable)."""

    outcome: str
    answer: dict[str, Any] | None = None
    replayed: int = 0
    error: str | None = None


class Sender:
    """Delivers reports through a transport, spooling what the backend cannot take now.

    `wait(seconds)` sleeps between retries and returns True when the agent is asked to stop
    (SIGTERM), which ends the retries early: the report goes to the spool.
    """

    def __init__(
        self,
        transport: Transport,
        spool: Spool | None = None,
        *,
        attempts: int = 4,
        backoff: Backoff | None = None,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        self.transport = transport
        self.spool = spool
        self.attempts = max(1, attempts)
        self.backoff = backoff or Backoff()
        self._wait = wait or _sleep

    def deliver(self, report: dict[str, Any]) -> Delivery:
        """Replay the spool, then send `report`. Raises PermanentError (4xx) for the new
        report, and TransientError when the backend is away and there is no spool."""
        body = json.dumps(report, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        replayed = 0
        if self.spool is not None:
            try:
                replayed = self.replay()
            except TransientError as exc:
                return self._to_spool(body, exc, replayed)
        try:
            answer = self._send_with_retries(body)
        except TransientError as exc:
            if self.spool is None:
                raise
            return self._to_spool(body, exc, replayed)
        return Delivery("sent", answer=answer, replayed=replayed)

    def _to_spool(self, body: bytes, exc: TransientError, replayed: int) -> Delivery:
        """Keep the report for later; a spool that cannot be written loses only this one."""
        assert self.spool is not None
        try:
            self.spool.put(body)
        except OSError as error:
            logger.error("%s; and the spool failed (%s): report lost", exc, error)
            return Delivery("lost", replayed=replayed, error=f"{exc}; spool failed: {error}")
        logger.warning("%s; report spooled (%d waiting)", exc, len(self.spool.pending()))
        return Delivery("spooled", replayed=replayed, error=str(exc))

    def replay(self) -> int:
        """Send spooled reports oldest first; stops at the first transient failure (raised).
        A spooled report the backend refuses (400, 413) is dropped so it cannot block the
        queue; a refused token (401, 403) stops the replay and keeps everything."""
        if self.spool is None:
            return 0
        sent = 0
        for path in self.spool.pending():
            try:
                body = path.read_bytes()
            except OSError:
                continue
            try:
                self.transport.post(body)
            except PermanentError as exc:
                if exc.token_rejected:
                    raise
                logger.error("spooled report %s refused, dropped: %s", path.name, exc)
                self.spool.remove(path)
                continue
            self.spool.remove(path)
            sent += 1
        if sent:
            logger.info("replayed %d spooled report(s)", sent)
        return sent

    def _send_with_retries(self, body: bytes) -> dict[str, Any]:
        last: TransientError | None = None
        for attempt in range(self.attempts):
            try:
                return self.transport.post(body)
            except TransientError as exc:
                last = exc
                if attempt + 1 >= self.attempts:
                    break
                delay = self.backoff.delay(attempt, exc.retry_after)
                logger.info("%s; retrying in %.1fs", exc, delay)
                if self._wait(delay):
                    break  # asked to stop: no more retries
        assert last is not None
        raise last


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False
