"""Fabric findings on the findings page read as words and filter like any other type (issue 23,
item 6: "fabric findings show a raw type name that cannot be filtered")."""

from __future__ import annotations

import pytest

from findings.choices import Family, FindingType, Severity
from findings.models import Finding

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("finding_type", FindingType.of_family(Family.FABRIC))
def test_each_fabric_type_shows_its_words_and_filters(client, user, finding_type):
    words = FindingType(finding_type).label
    Finding.objects.create(
        type=finding_type, severity=Severity.WARNING, subject="fabric:1:x", message="fabric one"
    )
    Finding.objects.create(
        type=FindingType.DRIVER_SKEW,
        severity=Severity.WARNING,
        subject="cluster:1:driver",
        message="not fabric",
    )
    client.force_login(user)
    body = client.get("/findings/", {"type": finding_type}).content.decode()
    assert f'<option value="{finding_type}" selected>' in body
    table = body[body.index('id="findings"') :]
    assert "fabric one" in table and "not fabric" not in table
    assert str(words).replace("'", "&#x27;") in table
    assert f">{finding_type}<" not in table  # the code itself is never the cell's text
    api = client.get("/api/v1/findings/", {"type": finding_type}).json()
    assert [f["message"] for f in api["results"]] == ["fabric one"]
