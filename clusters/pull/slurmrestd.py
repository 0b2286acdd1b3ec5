"""Pull nodes (and jobs) from slurmrestd over HTTP with a JWT (``scontrol token``).

slurmrestd authenticates each request by two headers, ``X-SLURM-USER-NAME`` and
``X-SLURM-USER-TOKEN``. The token is a secret: it goes into those headers and nowhere
else, never into a log line or an exception message (errors are raised ``from None`` so
the HTTP library's exception, which holds the request and its headers, is not chained).
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0
# Newest first: "auto" takes the first version the server answers.
SUPPORTED_VERSIONS = (
    "v0.0.44",
    "v0.0.43",
    "v0.0.42",
    "v0.0.41",
    "v0.0.40",
    "v0.0.39",
    "v0.0.38",
)
_VERSION = re.compile(r"^v0\.0\.\d+$")


class SlurmRestError(RuntimeError):
    """A slurmrestd pull failed. ``status`` is the HTTP status where there was one.

    The message names the server (without credentials), the status and Slurm's own error
    text; it never holds the token.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def safe_url(url: str) -> str:
    """The URL without user info, query or fragment, fit for logs and messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def nodes_path(version: str, resource: str = "nodes") -> str:
    """The nodes (or jobs) endpoint of one API version, spelled as its OpenAPI description
    does (v0.0.38 without the trailing slash)."""
    return f"/slurm/{version}/{resource}" + ("" if version == "v0.0.38" else "/")


def _slurm_errors(response: requests.Response) -> str:
    try:
        document = response.json()
    except ValueError:
        return ""
    if not isinstance(document, dict):
        return ""
    messages = []
    for error in document.get("errors") or []:
        if isinstance(error, dict):
            text = error.get("description") or error.get("error")
            if text:
                messages.append(str(text)[:200])
    return "; ".join(messages)


def _get(
    session: requests.Session, base_url: str, version: str, timeout: float, resource: str
) -> requests.Response:
    url = base_url.rstrip("/") + nodes_path(version, resource)
    try:
        return session.get(url, timeout=timeout, allow_redirects=False)
    except requests.Timeout:
        raise SlurmRestError(
            f"slurmrestd at {safe_url(base_url)} did not answer within {timeout:g} s"
        ) from None
    except requests.RequestException as exc:
        raise SlurmRestError(
            f"cannot reach slurmrestd at {safe_url(base_url)}: {type(exc).__name__}"
        ) from None


def _check(
    response: requests.Response, base_url: str, version: str, token: str, resource: str
) -> dict[str, Any]:
    where = f"slurmrestd at {safe_url(base_url)} ({version})"
    errors = _slurm_errors(response).replace(token, "***") if token else _slurm_errors(response)
    detail = f": {errors}" if errors else ""
    if response.status_code in (401, 403):
        raise SlurmRestError(
            f"{where} refused the credentials (HTTP {response.status_code}); check the user "
            f"name and that the JWT is valid and unexpired{detail}",
            response.status_code,
        )
    if response.status_code != 200:
        raise SlurmRestError(
            f"{where} answered HTTP {response.status_code}{detail}", response.status_code
        )
    try:
        document = response.json()
    except ValueError:
        raise SlurmRestError(f"{where} answered something that is not JSON", 200) from None
    if not isinstance(document, dict) or not isinstance(document.get(resource), list):
        raise SlurmRestError(f"{where} answered JSON without a {resource} list", 200)
    if errors and not document[resource]:
        raise SlurmRestError(f"{where} reported errors{detail}", 200)
    return document


def fetch_nodes(
    base_url: str,
    token: str,
    user: str | None = None,
    version: str = "v0.0.38",
    timeout: float = DEFAULT_TIMEOUT_S,
    verify: bool | str = True,
) -> dict[str, Any]:
    """``GET /slurm/<version>/nodes`` from slurmrestd; the decoded JSON response.

    ``version`` is one API version (``v0.0.38`` is what Debian 12's Slurm 22.05 serves)
    or ``"auto"``: the newest of SUPPORTED_VERSIONS the server answers (a version it does
    not serve is a 404). ``user`` may be None where the JWT names its user. Raises
    SlurmRestError for an unreachable server, refused credentials, an unserved version or
    a response that reports errors and no nodes; never returns a partial answer.
    ``verify`` is passed to requests: False, or a CA bundle path for a private CA.
    """
    return fetch(
        base_url, token, "nodes", user=user, version=version, timeout=timeout, verify=verify
    )


def fetch_jobs(
    base_url: str,
    token: str,
    user: str | None = None,
    version: str = "v0.0.38",
    timeout: float = DEFAULT_TIMEOUT_S,
    verify: bool | str = True,
) -> dict[str, Any]:
    """``GET /slurm/<version>/jobs``: every job the controller still knows, with the
    per-node ``gres_detail`` the workloads layer reads. Same rules and errors as
    ``fetch_nodes``."""
    return fetch(
        base_url, token, "jobs", user=user, version=version, timeout=timeout, verify=verify
    )


def fetch(
    base_url: str,
    token: str,
    resource: str,
    *,
    user: str | None = None,
    version: str = "v0.0.38",
    timeout: float = DEFAULT_TIMEOUT_S,
    verify: bool | str = True,
) -> dict[str, Any]:
    """``GET /slurm/<version>/<resource>`` (``nodes`` or ``jobs``); see ``fetch_nodes``."""
    if not base_url.startswith(("http://", "https://")):
        raise SlurmRestError("the slurmrestd URL must start with http:// or https://")
    if version != "auto" and not _VERSION.match(version):
        raise SlurmRestError(f"{version!r} is not a slurmrestd API version (like v0.0.38)")
    headers = {"Accept": "application/json", "X-SLURM-USER-TOKEN": token}
    if user:
        headers["X-SLURM-USER-NAME"] = user
    versions = SUPPORTED_VERSIONS if version == "auto" else (version,)
    with requests.Session() as session:
        session.headers.update(headers)
        session.verify = verify
        for candidate in versions:
            response = _get(session, base_url, candidate, timeout, resource)
            if response.status_code == 404 and version == "auto":
                continue
            if response.status_code == 404:
                raise SlurmRestError(
                    f"slurmrestd at {safe_url(base_url)} does not serve {candidate} "
                    "(start it with -s openapi/... for that version, or use version='auto')",
                    404,
                )
            document = _check(response, base_url, candidate, token, resource)
            logger.info(
                "fetched %d %s from slurmrestd at %s (%s)",
                len(document[resource]),
                resource,
                safe_url(base_url),
                candidate,
            )
            return document
    raise SlurmRestError(
        f"slurmrestd at {safe_url(base_url)} serves none of {', '.join(SUPPORTED_VERSIONS)}",
        404,
    )
