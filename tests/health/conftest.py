"""Fixtures of the health tests: the report schema and fleets of reports with events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from agent.schema import load_schema


@pytest.fixture(scope="session")
def validate_report() -> Callable[[dict[str, Any]], None]:
    """Asserts a report is valid against the v1 JSON Schema, listing every error."""
    validator = jsonschema.Draft202012Validator(
        load_schema(), format_checker=jsonschema.FormatChecker()
    )

    def check(report: dict[str, Any]) -> None:
        errors = sorted(validator.iter_errors(report), key=lambda e: list(e.absolute_path))
        assert not errors, "\n".join(
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:20]
        )

    return check
