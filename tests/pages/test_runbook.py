"""docs/findings.md: every finding type the backend can raise has its runbook section."""

from __future__ import annotations

import re
from pathlib import Path

from findings.choices import FindingType

RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "findings.md"


def finding_types() -> set[str]:
    """Every type of every family: the one vocabulary (findings.choices)."""
    return set(FindingType.values)


def sections() -> dict[str, str]:
    text = RUNBOOK.read_text(encoding="utf-8")
    parts = re.split(r"^## ([a-z0-9_]+)\s*$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_every_finding_type_has_a_section():
    missing = finding_types() - set(sections())
    assert not missing, f"docs/findings.md lacks: {sorted(missing)}"


def test_no_section_for_a_type_that_does_not_exist():
    assert set(sections()) - finding_types() == set()


def test_every_section_says_what_it_means_and_what_to_do():
    for name, body in sections().items():
        assert re.search(r"^\*\*.+\*\*", body.strip()), f"{name}: no meaning line"
        assert re.search(r"^- ", body, flags=re.M), f"{name}: no action"


def test_the_fabric_types_are_found():
    assert {"fabric_link_degraded", "fabric_wrong_rail"} <= finding_types()
