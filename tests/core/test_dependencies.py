"""One definition of what every app shares (the layers themselves: test_layering.py)."""

from __future__ import annotations

from pathlib import Path

import core

from .test_layering import LAYERS


def test_is_staff_or_read_only_has_one_definition():
    repo = Path(core.__file__).parent.parent
    defined = [
        str(path.relative_to(repo))
        for app in LAYERS
        for path in (repo / app).rglob("*.py")
        if "class IsStaffOrReadOnly" in path.read_text()
    ]
    assert defined == ["core/api/permissions.py"]
