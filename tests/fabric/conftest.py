"""Fabric test helpers: the real ibnetdiscover captures and this folder's own fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "tests" / "fixtures" / "samples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SUPERPOD = "ibnetdiscover-superpod-ndr-topograph.out"
TREYDOCK = "ibnetdiscover-p-edr-treydock.out"
FABRIC_SAMPLES = (SUPERPOD, TREYDOCK)


def shared_samples() -> Path | None:
    """The project's shared samples folder, when this checkout sits beside it."""
    configured = os.environ.get("ATLAS_SAMPLES_DIR")
    if configured:
        return Path(configured)
    for parent in REPO.parents:
        candidate = parent / "shared" / "samples"
        if candidate.is_dir():
            return candidate
    return None


def sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def without_cable(text: str, host_port: str) -> str:
    """An ibnetdiscover output with `host_port` (e.g. "gpu00003 mlx5_0") unplugged: the
    switch's line for it and the host CA's block are dropped."""
    lines = text.split("\n")
    tag = f'# "{host_port}"'
    switch_line = next(i for i, line in enumerate(lines) if tag in line)
    ca = next(i for i, line in enumerate(lines) if line.endswith(tag))
    return "\n".join(
        line for i, line in enumerate(lines) if i != switch_line and not ca - 4 <= i <= ca + 1
    )


@pytest.fixture
def superpod() -> bytes:
    return sample(SUPERPOD)


@pytest.fixture
def treydock() -> bytes:
    return sample(TREYDOCK)
