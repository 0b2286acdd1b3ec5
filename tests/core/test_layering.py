"""The layers of docs/architecture.md, as a table the imports must keep.

Each app imports only apps of a lower layer, never a sibling of its own layer nor anything
above it; every package at the top of the tree must be placed in the table (a new app is
placed before it lands). Imports inside functions count too: a lazy import is the same arrow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# app -> layer, from the bottom up. Siblings share a layer and never import each other.
LAYERS: dict[str, int] = {
    "agent": 0,  # runs on GPU servers; the backend imports only its contract modules
    "core": 1,  # no domain
    "inventory": 2,  # the physical truth
    "findings": 3,  # every finding of every family
    "clusters": 4,
    "fabric": 4,
    "health": 4,
    "workloads": 5,  # what runs on the GPUs (its own issue)
    "topology": 6,
    "placement": 6,
    "integrations": 6,
    "config": 7,  # the composition root
    "demo": 7,  # the demo fleet: the only backend importer of simulator/
    "simulator": 7,  # fake NVML and fleets: tests and the demo, never the agent's wheel
}

# What the backend may import of the agent: the one contract both ends share.
AGENT_CONTRACT = {"agent", "agent.schema", "agent.mig", "agent.sources.text"}
# Who may import the simulator (tests aside).
SIMULATOR_USERS = {"demo", "simulator"}
# Top-level folders that are not Python apps of the product.
NOT_APPS = {"tests", "bench", "docs", "static", "staticfiles", "templates", "deploy", "var"}


def _packages() -> set[str]:
    return {
        path.name
        for path in REPO.iterdir()
        if path.is_dir()
        and not path.name.startswith(".")
        and path.name not in NOT_APPS
        and (path / "__init__.py").exists()
    }


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth of its code (relative imports are its own)."""
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
            modules |= {f"{node.module}.{alias.name}" for alias in node.names}
    return modules


def wrong_arrows(app: str, imported: set[str]) -> set[str]:
    """The imports of `app`'s code that go against the table."""
    wrong = set()
    for module in imported:
        target = module.split(".")[0]
        if target == app or target not in LAYERS:
            continue
        if target == "agent" and app not in {"simulator"}:
            if app != "agent" and not _contract(module):
                wrong.add(module)
            continue
        if target == "simulator":
            if app not in SIMULATOR_USERS:
                wrong.add(module)
            continue
        if app == "agent" or LAYERS[target] >= LAYERS[app]:
            wrong.add(module)
    return wrong


def _contract(module: str) -> bool:
    """`from agent.schema import x` names `agent.schema` and `agent.schema.x`: either is fine."""
    parent = module.rsplit(".", 1)[0]
    return module in AGENT_CONTRACT or (parent in AGENT_CONTRACT and parent != "agent")


def test_every_app_is_placed_in_the_table():
    assert _packages() - set(LAYERS) == set()


@pytest.mark.parametrize("app", sorted(LAYERS))
def test_app_imports_only_the_layers_below_it(app):
    root = REPO / app
    if not root.is_dir():
        pytest.skip(f"{app}/ is not in the tree yet")
    offenders = {}
    for path in sorted(root.rglob("*.py")):
        wrong = wrong_arrows(app, _imports(path))
        if wrong:
            offenders[str(path.relative_to(REPO))] = sorted(wrong)
    assert offenders == {}


# Pure modules (docs/architecture.md): plain data in, plain data out, no ORM, no Django.
PURE = [
    "agent/mig.py",
    "clusters/parsers/slurm_text.py",
    "clusters/parsers/kubernetes.py",
    "clusters/rules/registry.py",
    "fabric/graph.py",
    "fabric/lldp.py",
    "fabric/exports.py",
    "fabric/rules.py",
    "fabric/parsers/ibnetdiscover.py",
    "health/rules.py",
    "placement/facts.py",
    "placement/gpu_sets.py",
    "placement/locality.py",
    "placement/planner.py",
    "placement/capacity.py",
    "placement/failure_domains/arithmetic.py",
    "workloads/rules.py",
]


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_touch_no_orm(module):
    roots = {name.split(".")[0] for name in _imports(REPO / module)}
    assert roots & {"django", "rest_framework", "django_filters"} == set()


@pytest.mark.parametrize(
    ("app", "module", "allowed"),
    [
        ("inventory", "core.tables", True),
        ("inventory", "clusters.models", False),  # up
        ("fabric", "health.rules", False),  # a sibling
        ("fabric", "findings.services", True),
        ("findings", "clusters.models", False),  # the FK is by string, never an import
        ("topology", "placement.service", False),  # readers are siblings
        ("config", "topology.views", True),
        ("core", "inventory.models", False),
        ("agent", "core.safe_input", False),  # the agent never imports the backend
        ("inventory", "agent.schema", True),
        ("inventory", "agent.collector", False),  # not the contract
        ("topology", "simulator.demo", False),  # only demo/ builds the fleet
        ("demo", "simulator.demo", True),
    ],
)
def test_the_table_says_what_it_means(app, module, allowed):
    assert (wrong_arrows(app, {module}) == set()) is allowed
