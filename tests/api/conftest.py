"""Fixtures of the API tests that heartbeat (tests/api/test_heartbeat*.py); what they share
besides, constants and helpers, is in tests/heartbeats.py."""

from __future__ import annotations

import pytest

from agent.schema import report_digest
from inventory.models import Server
from inventory.services import agent_token_create
from tests.heartbeats import DIGEST_HEADER, LONG_AGO, digest_header
from tests.reports import make_report


@pytest.fixture
def post_heartbeat(post_report):
    """POST a heartbeat as an agent would (tests/conftest.py's `post_report`): `digest` (hex)
    named in X-Atlas-Report-Digest, or `header` sent as that header as it is (malformed ones
    too), or neither; the body empty unless given. Returns the response."""

    def post(key: str, *, digest: str | None = None, header: str | None = None, body=b""):
        extra = digest_header(digest) if digest is not None else {}
        if header is not None:
            extra = {DIGEST_HEADER: header}
        return post_report(body, key, **extra)

    return post


@pytest.fixture
def reporting(post_report):
    """A server of its own for each name, its first report applied and its last_seen set to
    LONG_AGO; returns (key, report, server)."""

    def reporting(name: str):
        _, key = agent_token_create(name=name)
        report = make_report(name)
        assert post_report(report, key).json()["status"] == "pending"
        server = Server.objects.get(hostname=name)
        assert server.last_report_hash == report_digest(report)
        Server.objects.filter(pk=server.pk).update(last_seen=LONG_AGO)
        return key, report, server

    return reporting
