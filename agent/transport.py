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
  A report whose facts the backend already took (the same digest, no events) goes first as
  its digest alone (`X-Atlas-Report-Digest`, empty body): the backend answers "unchanged"
  without reading a report, or 409 and the report follows in full. A backend that does not
  know the header (400) gets full reports from then on.
  A spooled report the backend keeps failing (5xx) while it takes others does not hold the
  queue: replay goes past it, and after `SET_ASIDE_AFTER` such failures it is set aside
  (kept in `<spool>/set-aside/`, logged by name, named in every later report's warnings).

The token is never logged or printed: it only ever appears in the request header, and
`RedactingFilter` scrubs it from any log line that might echo it back.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from http.client import HTTPException
from pathlib import Path
from typing import Any

from . import __version__
from .schema import DIGEST_HEADER, DIGEST_SCHEME, report_digest

logger = logging.getLogger("agent.transport")

REPORTS_PATH = "/api/v1/reports/"


class DeliveryError(Exception):
    """A report was not delivered."""


class TransientError(DeliveryError):
    """Worth retrying: the backend is unreachable, overloaded or failing (5xx, 408, 429).

    `status` is the backend's HTTP answer, None when it could not be reached.
    """

    def __init__(
        self, message: str, *, retry_after: float | None = None, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status


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
        return self._post(body, {})

    def post_digest(self, digest: str) -> dict[str, Any] | None:
        """Send only a report's digest (hex, `report_digest`): the backend's answer when it
        holds those facts (`"status": "unchanged"`); None when the report itself must follow
        (409). Raises as `post` for everything else: 400 from a backend that does not know
        the header (it refuses the empty body), 401/403 a refused token, 5xx, unreachable."""
        try:
            answer = self._post(b"", {DIGEST_HEADER: f"{DIGEST_SCHEME}{digest}"})
        except PermanentError as exc:
            if exc.status == 409:
                return None
            raise
        return answer if answer.get("status") == "unchanged" else None

    def _post(self, body: bytes, headers: dict[str, str]) -> dict[str, Any]:
        request = urllib.request.Request(  # noqa: S310 - scheme checked in reports_url
            self.url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json",
                "Authorization": f"Token {self._token}",
                "User-Agent": f"cluster-atlas-agent/{__version__}",
                **headers,
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
                    f"backend answered {status}: {message}",
                    retry_after=_retry_after(exc.headers),
                    status=status,
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


# A spooled report is set aside after this many deliveries the backend failed (5xx) while it
# took other reports of the same agent: a deploy or a database failover clears in a cycle or
# two, five means the backend fails on this report itself. Failures while nothing gets
# through (the backend down for everyone) never count, so an outage sets nothing aside.
SET_ASIDE_AFTER = 5
# Set-aside reports are kept for a person to read; twenty are plenty to diagnose and bound
# the disk a backend that fails every report could fill (a report is 10-200 KB).
SET_ASIDE_MAX = 20
_ATTEMPTS_RE = re.compile(r"\+(\d+)\.json$")


class Spool:
    """Reports waiting for the backend: one file each, oldest first, at most `max_reports`.

    A report's failed deliveries are counted in its file name (`<name>+<n>.json`), so the count
    survives restarts and one-shot runs; `set_aside` moves a report to `set-aside/` within.
    """

    SUFFIX = ".json"
    SET_ASIDE = "set-aside"

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

    @staticmethod
    def attempts(path: Path) -> int:
        """Failed deliveries of a spooled report counted so far."""
        match = _ATTEMPTS_RE.search(path.name)
        return int(match[1]) if match else 0

    def count_failure(self, path: Path) -> Path:
        """Count one more failed delivery of a spooled report; returns its new path."""
        base = _ATTEMPTS_RE.sub("", path.name).removesuffix(self.SUFFIX)
        new = path.with_name(f"{base}+{self.attempts(path) + 1}{self.SUFFIX}")
        os.replace(path, new)
        return new

    @property
    def set_aside_directory(self) -> Path:
        return self.directory / self.SET_ASIDE

    def set_aside(self, path: Path) -> Path:
        """Move a report out of the replay queue, kept; the oldest beyond SET_ASIDE_MAX go."""
        folder = self.set_aside_directory
        folder.mkdir(exist_ok=True, mode=0o700)
        final = folder / path.name
        os.replace(path, final)
        self._fsync_directory()
        kept = self.set_aside_reports()
        for old in kept[: max(0, len(kept) - SET_ASIDE_MAX)]:
            logger.error(
                "set-aside folder full (%d reports): deleting the oldest, %s",
                SET_ASIDE_MAX,
                old.name,
            )
            old.unlink(missing_ok=True)
        return final

    def set_aside_reports(self) -> list[Path]:
        """Reports set aside, oldest first."""
        folder = self.set_aside_directory
        if not folder.is_dir():
            return []
        return sorted(p for p in folder.iterdir() if p.name.endswith(self.SUFFIX))

    def notice(self) -> str | None:
        """A line for a report's warnings while reports are set aside (stable while they are,
        so an unchanged server still reports an unchanged report)."""
        kept = self.set_aside_reports()
        if not kept:
            return None
        names = ", ".join(p.name for p in kept[-3:])
        more = f" (newest: {names})" if len(kept) > 3 else f": {names}"
        text = (
            f"agent: {len(kept)} report(s) set aside in {self.set_aside_directory} after "
            f"{SET_ASIDE_AFTER} failed deliveries each while the backend took others{more}"
        )
        return text[:500]

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


# Replay ends after this many spooled reports failed in a row: one report that breaks the
# backend is passed over, a backend that fails everything is not sent the whole spool.
MAX_FAILURES_IN_A_ROW = 3


@dataclass
class _Replay:
    """What one delivery learnt: reports sent from the spool, those the backend failed, and
    whether it took or refused any report (so those failures were the reports' own)."""

    sent: int = 0
    failed: list[Path] = field(default_factory=list)
    backend_answers: bool = False


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
        # The digest of the facts the backend last took from this agent, and whether it
        # answers digests at all (a backend older than the header refuses them with 400).
        self._taken_digest: str | None = None
        self._digests_answered = True

    def deliver(self, report: dict[str, Any]) -> Delivery:
        """Replay the spool, then send `report`. Raises PermanentError (4xx) for the new
        report, and TransientError when the backend is away and there is no spool.

        While reports are set aside, `report` goes with a warning naming them.
        """
        report = self._with_notice(report)
        body = json.dumps(report, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        digest = None if report.get("events") else report_digest(report)
        replay = _Replay()
        try:
            if self.spool is not None:
                try:
                    self._replay(replay)
                except TransientError as exc:
                    return self._to_spool(body, exc, replay.sent)
            try:
                answer = self._send_with_retries(body, digest)
            except TransientError as exc:
                if self.spool is None:
                    raise
                return self._to_spool(body, exc, replay.sent)
            except PermanentError:
                replay.backend_answers = True  # it refused this one: it is up
                raise
            replay.backend_answers = True
            return Delivery("sent", answer=answer, replayed=replay.sent)
        finally:
            self._settle(replay)

    def _with_notice(self, report: dict[str, Any]) -> dict[str, Any]:
        notice = self.spool.notice() if self.spool is not None else None
        if notice is None:
            return report
        # the schema allows 256 warnings: the notice takes the last place if they are all used
        warnings = [w for w in report.get("warnings") or [] if w != notice][:255]
        return {**report, "warnings": [*warnings, notice]}

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
        """Send spooled reports oldest first (see `deliver`); the number sent."""
        replay = _Replay()
        try:
            self._replay(replay)
        finally:
            self._settle(replay)
        return replay.sent

    def _replay(self, replay: _Replay) -> None:
        """One try per spooled report, oldest first, going past reports the backend fails.

        A report answered 5xx or 408 is noted and passed over; after MAX_FAILURES_IN_A_ROW
        such answers in a row the replay ends (the backend is failing, not these reports) and
        the new report is tried. It stops, raising, when the backend is unreachable or asks
        to slow down (429). A report refused (400, 413) is dropped so it cannot block the
        queue; a refused token (401, 403) stops the replay and keeps everything.
        """
        assert self.spool is not None
        in_a_row = 0
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
                replay.backend_answers = True
                logger.error("spooled report %s refused, dropped: %s", path.name, exc)
                self.spool.remove(path)
                continue
            except TransientError as exc:
                if exc.status is None or exc.status == 429:
                    raise
                replay.failed.append(path)
                logger.warning("spooled report %s not taken (%s)", path.name, exc)
                in_a_row += 1
                if in_a_row >= MAX_FAILURES_IN_A_ROW:
                    break
                continue
            in_a_row = 0
            replay.backend_answers = True
            self.spool.remove(path)
            replay.sent += 1
        if replay.sent:
            logger.info("replayed %d spooled report(s)", replay.sent)

    def _settle(self, replay: _Replay) -> None:
        """Count the failures of spooled reports, when the backend took or refused another
        report meanwhile (so they were these reports' own); set aside those that reach
        SET_ASIDE_AFTER."""
        if self.spool is None or not replay.failed or not replay.backend_answers:
            return
        for path in replay.failed:
            try:
                counted = self.spool.count_failure(path)
                if self.spool.attempts(counted) >= SET_ASIDE_AFTER:
                    kept = self.spool.set_aside(counted)
                    logger.error(
                        "spooled report %s failed %d deliveries while others went through: "
                        "set aside as %s",
                        path.name,
                        SET_ASIDE_AFTER,
                        kept,
                    )
            except OSError as exc:  # removed meanwhile, or the disk: try again next cycle
                logger.warning("could not count the failure of %s: %s", path.name, exc)

    def _send_with_retries(self, body: bytes, digest: str | None = None) -> dict[str, Any]:
        last: TransientError | None = None
        for attempt in range(self.attempts):
            try:
                return self._send(body, digest)
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

    def _send(self, body: bytes, digest: str | None) -> dict[str, Any]:
        """The digest alone when the backend took these facts from us last, else (or when it
        asks for them) the report; remembers the digest of what the backend took."""
        if digest is not None and digest == self._taken_digest and self._digests_answered:
            try:
                answer = self.transport.post_digest(digest)
            except PermanentError as exc:
                if exc.status != 400:
                    raise
                self._digests_answered = False  # a backend that does not know the header
                answer = None
            if answer is not None:
                return answer
        answer = self.transport.post(body)
        self._taken_digest = digest
        return answer


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False
