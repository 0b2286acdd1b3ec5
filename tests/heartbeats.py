"""What the heartbeat tests share (tests/api/test_heartbeat*.py, and enrollment's): the
answers they expect, the header that names a digest, a server's last_seen read back, and the
web process's memory turned on. Their fixtures are in tests/api/conftest.py."""

from __future__ import annotations

from datetime import UTC, datetime

from inventory.models import Server
from inventory.services import heartbeat_memory_enable

LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)  # a last_seen that any heartbeat moves on
UNKNOWN = {"detail": "Unknown or revoked agent token."}
SEND_REPORT = {"detail": "the report changed: send it in full", "status": "send-report"}
DIGEST_HEADER = "HTTP_X_ATLAS_REPORT_DIGEST"  # X-Atlas-Report-Digest, as the test client names it


def digest_header(digest: str) -> dict[str, str]:
    """The test client's keyword for `X-Atlas-Report-Digest: sha256:<digest>` (hex)."""
    return {DIGEST_HEADER: f"sha256:{digest}"}


def seen(server: Server) -> datetime | None:
    """The server's last_seen as stored now."""
    return Server.objects.get(pk=server.pk).last_seen


def unchanged(server: Server) -> dict:
    """The answer to a heartbeat naming this server's last applied report."""
    return {"id": server.last_report_id, "status": "unchanged", "server": server.pk}


def remember_heartbeats(settings, *, cache_s: int = 5) -> None:
    """The web process's memory (config/wsgi.py) for this test, flushed by hand
    (`heartbeat_flush`); tests/conftest.py turns it off after each test."""
    settings.ATLAS_HEARTBEAT_CACHE_S = cache_s
    heartbeat_memory_enable(flusher=False)
