"""`bench/nodes_list.py` runs end to end at a tiny size, so the benchmark keeps working."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

pytestmark = pytest.mark.django_db


def _bench_module():
    """The script by its path: `bench/` is no package."""
    if str(BENCH) not in sys.path:
        sys.path.append(str(BENCH))  # after the apps: its `_django` helper, nothing shadowed
    spec = importlib.util.spec_from_file_location("bench_nodes_list", BENCH / "nodes_list.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_nodes_list_bench_runs_at_a_tiny_size(capsys):
    figures = _bench_module().run(300, repeat=1)
    out = capsys.readouterr().out
    assert "first page" in out and "deep page" in out and "filtered page" in out
    for page in ("first page", "filtered page", "deep page"):
        assert figures[page]["seconds"] > 0 and figures[page]["floor"] > 0
    # A fixed query budget: the same count for every page, whatever the depth.
    counts = {figures[page]["queries"] for page in ("first page", "filtered page", "deep page")}
    assert len(counts) == 1
