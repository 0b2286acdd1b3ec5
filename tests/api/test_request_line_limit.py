"""gunicorn refuses a request line over 4094 bytes with 414, before Django: the README's
production command and the systemd unit raise it, as filters make long URLs."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)


def test_the_production_command_and_the_unit_raise_the_request_line_limit():
    readme = (ROOT / "README.md").read_text()
    production = readme.split("## Production shape", 1)[1].split("\n## ", 1)[0]
    assert "--limit-request-line 8190" in production
    assert "4094 bytes" in production and "414" in production
    unit = (ROOT / "deploy/systemd/cluster-atlas-web.service").read_text()
    assert "--limit-request-line 8190" in unit
