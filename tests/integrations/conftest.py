"""Fixtures of the integrations tier: metrics switched on, a staff API client."""

from __future__ import annotations

import pytest

METRICS_TOKEN = "scrape-me-0123456789abcdef"


@pytest.fixture
def metrics_on(settings) -> str:
    settings.ATLAS_METRICS_TOKEN = METRICS_TOKEN
    settings.ATLAS_METRICS_FLUSH_S = 0  # every counted answer written at once
    return METRICS_TOKEN


@pytest.fixture
def staff_api(staff):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(staff)
    return client
