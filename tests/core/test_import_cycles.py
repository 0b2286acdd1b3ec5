"""No app's modules import each other in a circle (issue 22).

A cycle inside an app means a helper sits in the wrong module: the reads, the writes and the
pure functions of an app import one way (pure modules and models at the bottom, selectors
above them, services above those, tasks and views on top). The graph is built from the source
with `ast`, one app at a time, so no module is imported to test it.

Two graphs. Module level: every import a module runs, or names for type checking, when it is
loaded; there a cycle is an error. Everywhere: also the imports inside function bodies; there
a cycle must be one of the few deliberate, deferred ones listed below, each with its reason
(a service that schedules its own follow-up task, whose task calls that service).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOT_APPS = {"tests", "bench", "docs", "deploy", "static", "templates"}
APPS = sorted(
    path.name
    for path in REPO.iterdir()
    if path.is_dir() and (path / "__init__.py").is_file() and path.name not in NOT_APPS
)

KNOWN_MODULE_LEVEL_CYCLES: set[frozenset[str]] = set()

DEFERRED_CYCLES: set[frozenset[str]] = {
    # A fabric service schedules its findings pass on commit (importing tasks in its body);
    # the tasks are thin adapters over the services.
    frozenset({"fabric.services", "fabric.tasks"}),
    # Likewise a snapshot or a bind requests its reconcile on commit (clusters.services).
    frozenset({"clusters.services", "clusters.tasks"}),
    # And an applied workload listing schedules what follows it (workloads.services.intake);
    # the pull task is an adapter over the sync service, which ingests through intake.
    frozenset({"workloads.services.intake", "workloads.services.sync", "workloads.tasks"}),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.Module, *, in_functions: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif in_functions or not isinstance(
            node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
        ):
            stack.extend(ast.iter_child_nodes(node))


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join([*base, *([node.module] if node.module else [])])
    else:
        source = node.module or ""
    # `from package import name` imports the package, and the module `name` if there is one.
    return [source, *(f"{source}.{alias.name}" for alias in node.names)]


def import_graph(app: str, *, in_functions: bool) -> dict[str, set[str]]:
    """Module -> the modules of the same app it imports."""
    files = {
        _module_name(path): path
        for path in (REPO / app).rglob("*.py")
        if "migrations" not in path.parts
    }
    graph: dict[str, set[str]] = {module: set() for module in files}
    for module, path in files.items():
        tree = ast.parse(path.read_text("utf-8"), str(path))
        for node in _imports(tree, in_functions=in_functions):
            for target in _targets(node, module, path.name == "__init__.py"):
                # A submodule importing its own package finds it half-loaded, never in a loop.
                if target in files and target != module and not module.startswith(target + "."):
                    graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: set[frozenset[str]] = set()
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[module] = min(low[module], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == module:
                            break
                    if len(component) > 1:
                        found.add(frozenset(component))
    return found


def _sorted(found: set[frozenset[str]]) -> list[list[str]]:
    return sorted(sorted(component) for component in found)


def test_the_apps_are_found():
    assert {"agent", "core", "inventory", "clusters", "fabric", "health", "topology"} <= set(APPS)


@pytest.mark.parametrize("app", APPS)
def test_no_app_imports_its_own_modules_in_a_circle(app):
    found = cycles(import_graph(app, in_functions=False)) - KNOWN_MODULE_LEVEL_CYCLES
    assert _sorted(found) == []


@pytest.mark.parametrize("app", APPS)
def test_an_import_inside_a_function_closes_only_a_deliberate_cycle(app):
    allowed = KNOWN_MODULE_LEVEL_CYCLES | DEFERRED_CYCLES
    assert _sorted(cycles(import_graph(app, in_functions=True)) - allowed) == []


def test_the_cycle_finder_sees_a_cycle_through_a_function_body_and_a_type_import():
    graph = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "a.w": {"a.x"}}
    assert _sorted(cycles(graph)) == [["a.x", "a.y", "a.z"]]
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .b import B\n"
        "def f():\n    from .c import C\n"
    )
    module_level = [n.module for n in _imports(tree, in_functions=False)]
    everywhere = [n.module for n in _imports(tree, in_functions=True)]
    assert sorted(filter(None, module_level)) == ["b", "typing"]
    assert sorted(filter(None, everywhere)) == ["b", "c", "typing"]
