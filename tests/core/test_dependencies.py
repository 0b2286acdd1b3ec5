"""core/ is the bottom layer: it imports no other app of the project.

The agent package is below every app (the backend shares its text decoder and report schema),
so core may use it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import core

APPS = {
    "inventory",
    "findings",
    "clusters",
    "fabric",
    "health",
    "topology",
    "simulator",
    "config",
}


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_core_imports_no_other_app():
    root = Path(core.__file__).parent
    offenders = {
        str(path.relative_to(root)): sorted(_imported_roots(path) & APPS)
        for path in root.rglob("*.py")
    }
    assert {path: apps for path, apps in offenders.items() if apps} == {}


def test_is_staff_or_read_only_has_one_definition():
    repo = Path(core.__file__).parent.parent
    defined = [
        str(path.relative_to(repo))
        for app in ("core", "inventory", "clusters", "fabric", "health", "topology")
        for path in (repo / app).rglob("*.py")
        if "class IsStaffOrReadOnly" in path.read_text()
    ]
    assert defined == ["core/api/permissions.py"]


def _imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return modules


def test_clusters_fabric_and_health_never_import_each_other():
    """Siblings: what they share (findings) lives in findings/, a layer below them."""
    repo = Path(core.__file__).parent.parent
    crossing = {}
    for app in ("clusters", "fabric", "health"):
        others = {"clusters", "fabric", "health"} - {app}
        for path in (repo / app).rglob("*.py"):
            wrong = {m for m in _imported_modules(path) if m.split(".")[0] in others}
            if wrong:
                crossing[str(path.relative_to(repo))] = sorted(wrong)
    assert crossing == {}


def test_findings_imports_only_inventory_and_core():
    """findings/ sits below every app that writes findings; it points up only by string
    foreign keys (`clusters.Node`, `clusters.Cluster`)."""
    repo = Path(core.__file__).parent.parent
    above = APPS - {"inventory", "findings"} | {"integrations", "workloads", "placement", "demo"}
    offenders = {
        str(path.relative_to(repo)): sorted(_imported_roots(path) & above)
        for path in (repo / "findings").rglob("*.py")
    }
    assert {path: apps for path, apps in offenders.items() if apps} == {}
