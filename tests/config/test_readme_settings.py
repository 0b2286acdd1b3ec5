"""The README's configuration table names every environment variable that config/ reads.

The table is the operator's only list of knobs, so it must not drift from the code: the names
are read from the source (not from a hand-kept list), in every way settings read them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Where a variable that the table names may be read: the whole project but its tests (the
# demo's password is read by the demo, not by config/).
NOT_PROJECT_CODE = {"tests", "var", "staticfiles", "node_modules"}
ENVIRON_METHODS = {"get", "setdefault", "pop", "__getitem__"}


def _is_os_environ(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _environ_key(node: ast.AST) -> ast.expr | None:
    """The key expression of one environment read, or None when `node` is no such read.

    Reads: `os.environ.get(K)`, `.setdefault(K, ...)`, `.pop(K)`, `os.environ[K]`,
    `K in os.environ`, `os.getenv(K)`, and settings' helpers `env_*(K, default)`.
    """
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Name) and func.id.startswith("env_"):
            return node.args[0]
        if isinstance(func, ast.Attribute):
            if func.attr in ENVIRON_METHODS and _is_os_environ(func.value):
                return node.args[0]
            if func.attr == "getenv" and isinstance(func.value, ast.Name):
                return node.args[0] if func.value.id == "os" else None
    if isinstance(node, ast.Subscript) and _is_os_environ(node.value):
        return node.slice
    if (
        isinstance(node, ast.Compare)
        and isinstance(node.ops[0], ast.In | ast.NotIn)
        and _is_os_environ(node.comparators[-1])
    ):
        return node.left
    return None


def environment_reads(source: str) -> tuple[set[str], list[int]]:
    """The variable names a module reads, and the lines of reads whose name is not literal.

    A read with a computed name is allowed only inside an `env_*` helper (its caller passes
    the literal name, and is counted there).
    """
    names: set[str] = set()
    unnamed: list[int] = []
    tree = ast.parse(source)
    helpers = {
        id(inner)
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef) and fn.name.startswith("env_")
        for inner in ast.walk(fn)
    }
    for node in ast.walk(tree):
        key = _environ_key(node)
        if key is None:
            continue
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            names.add(key.value)
        elif id(node) not in helpers:
            unnamed.append(node.lineno)
    return names, unnamed


def readme_configuration_names(readme: str) -> set[str]:
    """Every `NAME` in the first column of the table under '## Configuration'."""
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("|"):
            first_cell = line.split("|")[1]
            names |= set(re.findall(r"`([A-Z][A-Z0-9_]*)`", first_cell))
    return names


def _project_python_files():
    yield from ROOT.glob("*.py")
    for folder in sorted(ROOT.iterdir()):
        if (
            folder.is_dir()
            and not folder.name.startswith(".")
            and folder.name not in NOT_PROJECT_CODE
        ):
            yield from sorted(folder.rglob("*.py"))


def _reads_under(paths) -> set[str]:
    found: set[str] = set()
    for path in paths:
        names, _unnamed = environment_reads(path.read_text())
        found |= names
    return found


def test_every_variable_config_reads_is_in_the_readme_table():
    table = readme_configuration_names((ROOT / "README.md").read_text())
    read = _reads_under((ROOT / "config").glob("*.py"))

    assert read - table == set(), "add these to README.md's configuration table"


def test_config_reads_every_variable_by_a_literal_name():
    for path in sorted((ROOT / "config").glob("*.py")):
        _names, unnamed = environment_reads(path.read_text())
        assert unnamed == [], f"{path.name}: a computed name this check cannot follow"


def test_the_readme_table_lists_only_variables_the_backend_reads():
    table = readme_configuration_names((ROOT / "README.md").read_text())
    read = _reads_under(_project_python_files())

    assert table - read == set(), "README.md documents variables nothing reads"


def test_the_reader_finds_each_way_of_reading_the_environment():
    source = """
import os
from pathlib import Path

def env_int(name, default):
    value = os.environ.get(name)
    return int(value) if value else default

A = os.environ.get("A", "x")
B = os.environ["B"]
C = os.getenv("C")
D = env_int("D", 3)
os.environ.setdefault("E", "config.settings")
F = "F" in os.environ
G = Path(os.environ.get("G", "var"))
H = {"schedule": env_int("H", 60)}
settings.get("NOT_THE_ENVIRONMENT")
"""
    names, unnamed = environment_reads(source)

    assert names == {"A", "B", "C", "D", "E", "F", "G", "H"}
    assert unnamed == []


def test_the_reader_flags_a_computed_name_outside_a_helper():
    names, unnamed = environment_reads('import os\nPREFIX = "ATLAS_"\nos.environ[PREFIX + "X"]\n')

    assert names == set()
    assert unnamed == [3]


def test_the_table_reader_takes_every_name_of_a_shared_row():
    readme = (
        "# x\n\n## Configuration\n\n| variable | default | meaning |\n| --- | --- | --- |\n"
        "| `REDIS_URL` / `CELERY_BROKER_URL` | unset | the broker, see `NOT_A_ROW_NAME` |\n"
        "\n## Next\n\n| `ELSEWHERE` | x | y |\n"
    )

    assert readme_configuration_names(readme) == {"REDIS_URL", "CELERY_BROKER_URL"}
