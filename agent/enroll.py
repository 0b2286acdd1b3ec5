"""Enrollment: trade the fleet's enrollment token for this server's own agent token, once.

`python -m agent push --enroll-token-file FILE --state-dir DIR` (or `ATLAS_ENROLLMENT_TOKEN`):
when `DIR/agent-token` is missing, the agent POSTs its identity (the report's hostname,
system UUID, machine-id and the scheduler node names it knows) to `/api/v1/agents/enroll/`
with the enrollment token, and keeps the agent token it gets in `DIR/agent-token` (mode
0600, written to a temporary file in DIR, then renamed, so a crash leaves no half-written
token). Later runs read that file and never present the enrollment token again.

Neither token is ever logged: they travel in the Authorization header and a file only.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .transport import REPORTS_PATH, Backoff, PermanentError, TransientError, Transport

logger = logging.getLogger("agent.enroll")

ENROLL_PATH = "/api/v1/agents/enroll/"
AGENT_TOKEN_FILE = "agent-token"
ENV_ENROLLMENT_TOKEN = "ATLAS_ENROLLMENT_TOKEN"
IDENTITY_KEYS = ("hostname", "system_uuid", "machine_id")
NODE_NAME_KEYS = ("kubernetes_node_name", "slurm_node_name")


class EnrollmentRefused(Exception):
    """The backend refused the enrollment (401/403 a bad token, 409 already enrolled)."""


def enroll_url(url: str) -> str:
    """The enrollment endpoint for a backend URL (with or without a path prefix, or given as
    its reports endpoint, as `--url` may be)."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an http(s) URL: {url!r}")
    path = parts.path.rstrip("/").removesuffix(REPORTS_PATH.rstrip("/"))
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path + ENROLL_PATH, "", ""))


def enrollment_identity(report: dict[str, Any]) -> dict[str, str]:
    """What the agent says it is, from its report's host section: the node names only when
    the report knows them."""
    host = report.get("host") or {}
    identity = {key: str(host.get(key) or "") for key in IDENTITY_KEYS}
    identity.update({key: str(host[key]) for key in NODE_NAME_KEYS if host.get(key)})
    return identity


class _EnrollTransport(Transport):
    """The reports transport's TLS, redirect refusal and error handling, at the enroll URL."""

    def __init__(self, url: str, token: str, **kwargs: Any) -> None:
        super().__init__(url, token, **kwargs)
        self.url = enroll_url(url)

    def __repr__(self) -> str:
        return f"_EnrollTransport(url={self.url!r})"


def enroll(
    url: str,
    enrollment_token: str,
    identity: dict[str, str],
    *,
    attempts: int | None = 4,
    backoff: Backoff | None = None,
    wait: Callable[[float], bool] = lambda seconds: False,
    **transport_options: Any,
) -> str:
    """The agent token the backend issues for this identity. Retries an unreachable or
    failing backend with backoff (`attempts=None`: until `wait` says stop); raises
    EnrollmentRefused for a refusal, TransientError when the retries run out."""
    transport = _EnrollTransport(url, enrollment_token, **transport_options)
    backoff = backoff or Backoff()
    body = json.dumps(identity).encode("utf-8")
    attempt = 0
    while True:
        try:
            answer = transport._post(body, {})
        except PermanentError as exc:
            status = f" ({exc.status})" if exc.status else ""
            reason = str(exc).split(": ", 1)[-1]
            raise EnrollmentRefused(f"enrollment refused{status}: {reason}") from None
        except TransientError as exc:
            attempt += 1
            if attempts is not None and attempt >= attempts:
                raise
            delay = backoff.delay(min(attempt - 1, 10), exc.retry_after)
            logger.warning("enrollment: %s; retrying in %.1fs", exc, delay)
            if wait(delay):
                raise
            continue
        token = answer.get("token")
        if not isinstance(token, str) or not token.strip():
            raise EnrollmentRefused("enrollment answered without an agent token")
        logger.info("enrolled as server %s", answer.get("server"))
        return token.strip()


def store_agent_token(state_dir: str | os.PathLike[str], token: str) -> Path:
    """Write the agent token to `<state_dir>/agent-token`, mode 0600, atomically."""
    directory = Path(state_dir)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    final = directory / AGENT_TOKEN_FILE
    temp = directory / f".{AGENT_TOKEN_FILE}.{os.getpid()}.tmp"
    temp.unlink(missing_ok=True)  # left by a crash of this pid's namesake
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(token + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, final)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass
    return final
