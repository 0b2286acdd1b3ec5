"""demo/ is the backend's only importer of `simulator/` (the fleet simulator is for tests, the
demo and benchmarks, never for the served app)."""

from __future__ import annotations

import ast
from pathlib import Path

import demo

REPO = Path(demo.__file__).parent.parent
OUTSIDE_THE_BACKEND = {"simulator", "tests", "bench", "agent", "docs", "deploy", "static"}


def _imports_simulator(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "simulator" for a in node.names
        ):
            return True
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "simulator"
        ):
            return True
    return False


def test_only_demo_imports_the_simulator():
    backend = [
        top
        for top in REPO.iterdir()
        if (top / "__init__.py").exists() and top.name not in OUTSIDE_THE_BACKEND
    ]
    importers = {
        top.name for top in backend for path in top.rglob("*.py") if _imports_simulator(path)
    }
    assert importers == {"demo"}
