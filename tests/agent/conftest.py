"""Fixtures for the agent's tests: real samples, the report schema, fake servers.

Real samples come from $ATLAS_SAMPLES_DIR, else the shared folder beside the repository
(`../shared/samples`), else the copies in tests/fixtures/samples/ (a clean CI clone may have
no shared folder beside it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from agent.collector import collect
from agent.host import SysHost
from agent.schema import load_schema
from simulator.fake_nvml import FakeMachine, FakeNvmlBackend, fake_runner, materialize
from simulator.profiles import build

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
AGENT_FIXTURES = FIXTURES / "agent"

# Every real sample the agent's parsers read.
NVIDIA_SMI_SAMPLES = (
    "nvsmi-q-x-a100-sxm4-40gb-mig-netdata.xml",
    "nvsmi-q-x-rtxpro6000-blackwell-v13-telegraf.xml",
    "nvsmi-q-h100-mig-enabled-utku.txt",
    "nvsmi-q-h100x8-gpud.txt",
)
TOPOLOGY_SAMPLES = ("topo-1xl40s-ansi-escapes-utku.txt", "topo-8xh20-nv18-ibp-nics.txt")
LIST_SAMPLES = (
    "nvsmi-L-a100-40gb-mig-mixed-driver450-nvdocs.txt",
    "nvsmi-L-h100-mig-mixed-nvdocs.txt",
)
AGENT_SAMPLES = NVIDIA_SMI_SAMPLES + TOPOLOGY_SAMPLES + LIST_SAMPLES


def samples_dir() -> Path:
    configured = os.environ.get("ATLAS_SAMPLES_DIR")
    if configured:
        return Path(configured)
    shared = REPO.parent / "shared" / "samples"
    return shared if shared.is_dir() else FIXTURES / "samples"


@pytest.fixture(scope="session")
def samples() -> Path:
    return samples_dir()


@pytest.fixture(scope="session")
def sample_bytes(samples: Path) -> Callable[[str], bytes]:
    def read(name: str) -> bytes:
        path = samples / name
        if not path.is_file():  # a samples dir that lacks a file: the repository's copy
            path = FIXTURES / "samples" / name
        return path.read_bytes()

    return read


@pytest.fixture(scope="session")
def validate() -> Callable[[dict[str, Any]], None]:
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


@pytest.fixture
def fake_root(tmp_path: Path) -> Iterator[Path]:
    """Scratch space for fake /sys trees: memory-backed where possible (hundreds of files)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        folder = Path(tempfile.mkdtemp(prefix="atlas-test-", dir=shm))
        yield folder
        shutil.rmtree(folder, ignore_errors=True)
    else:
        yield tmp_path


@pytest.fixture
def collect_machine(fake_root: Path) -> Callable[[FakeMachine], dict[str, Any]]:
    """Run the real collector on a fake machine: fake NVML, its /sys tree under fake_root."""
    counter = iter(range(1000))

    def run(machine: FakeMachine, backend: FakeNvmlBackend | None = None) -> dict[str, Any]:
        root = fake_root / f"root-{next(counter)}"
        materialize(machine, root)
        return collect(backend or FakeNvmlBackend(machine), SysHost(root, run=fake_runner(machine)))

    return run


@pytest.fixture
def profile_report(
    collect_machine: Callable[[FakeMachine], dict[str, Any]],
) -> Callable[[str], dict[str, Any]]:
    def run(profile: str, seed: int = 7) -> dict[str, Any]:
        return collect_machine(build(profile, seed=seed))

    return run
