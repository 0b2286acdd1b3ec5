"""Fixtures of the integrations tier: metrics switched on, a staff API client, a DNS of
the test's own (no network here), loopback receivers allowed."""

from __future__ import annotations

import ipaddress
import socket

import pytest

METRICS_TOKEN = "scrape-me-0123456789abcdef"


@pytest.fixture
def metrics_on(settings) -> str:
    settings.ATLAS_METRICS_TOKEN = METRICS_TOKEN
    settings.ATLAS_METRICS_FLUSH_S = 0  # every counted answer written at once
    return METRICS_TOKEN


# A public address (example.com's, once) that names in tests resolve to unless told otherwise.
PUBLIC = "93.184.216.34"


@pytest.fixture(autouse=True)
def dns(monkeypatch) -> dict[str, list[str]]:
    """Names resolve to what the test puts in this dict (any other name: PUBLIC); IP literals
    and `localhost` resolve as the system resolves them. Webhook URLs are resolved when
    saved and at each delivery, and the sandbox has no DNS."""
    names: dict[str, list[str]] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        try:
            ipaddress.ip_address(str(host).strip("[]"))
            literal = True
        except ValueError:
            literal = False
        if literal or host in ("localhost", None):
            return real(host, port, *args, **kwargs)
        addresses = names.get(str(host).lower(), [PUBLIC])
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (
                socket.AF_INET6 if ":" in a else socket.AF_INET,
                socket.SOCK_STREAM,
                socket.IPPROTO_TCP,
                "",
                (a, int(port or 0), 0, 0) if ":" in a else (a, int(port or 0)),
            )
            for a in addresses
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return names


@pytest.fixture
def loopback_allowed(settings) -> None:
    """Receivers on 127.0.0.0/8 (the tests' own) allowed, as a site would allow its own."""
    settings.ATLAS_WEBHOOK_ALLOWED_NETWORKS = "127.0.0.0/8"
