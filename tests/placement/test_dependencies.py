"""placement/ is a reader beside topology/ and integrations/: it reads the domains below it
and never a sibling reader, and no sibling reads it (docs: DESIGN.md, "Architecture")."""

from __future__ import annotations

import ast
from pathlib import Path

import placement

REPO = Path(placement.__file__).parent.parent
READERS = {"topology", "placement", "integrations"}


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_readers_never_import_each_other():
    crossing = {}
    for app in sorted(READERS):
        for path in (REPO / app).rglob("*.py"):
            wrong = _imported_roots(path) & (READERS - {app})
            if wrong:
                crossing[str(path.relative_to(REPO))] = sorted(wrong)
    assert crossing == {}


def test_the_placement_engine_and_failure_arithmetic_touch_no_orm():
    """The pure modules of placement stay pure: plain data in, plain data out."""
    pure = ["facts.py", "gpu_sets.py", "locality.py", "planner.py", "capacity.py"]
    pure.append("failure_domains/arithmetic.py")
    root = REPO / "placement"
    touching = {p: sorted(_imported_roots(root / p) & {"django"}) for p in pure}
    assert {p: roots for p, roots in touching.items() if roots} == {}
