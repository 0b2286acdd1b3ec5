"""`bench/workloads.py` runs end to end at a tiny size, so the benchmark keeps working."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

pytestmark = pytest.mark.django_db


def _bench_module():
    """The script by its path: `bench/` is no package, and its name is the app's."""
    if str(BENCH) not in sys.path:
        sys.path.append(str(BENCH))  # after the apps: its `_django` helper, nothing shadowed
    spec = importlib.util.spec_from_file_location("bench_workloads", BENCH / "workloads.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_workloads_bench_runs_at_a_tiny_size(capsys):
    figures = _bench_module().run(24, 40, ticks=2, churn=0.1, pass_jobs=10, small=12)
    out = capsys.readouterr().out
    assert "the listing end to end" in out and "changed-job pass" in out
    assert figures["floor"] > 0 and figures["changed_pass"] > 0
    assert figures["first"]["floor"] > 0 and figures["churns"][0.1]["apply_ratio"] > 0
    assert "/api/v1/workloads/?page=last" in figures["pages"]
    assert set(figures["placement_after"]) == set(figures["placement_before"])
    server_page = figures["pages"]["/servers/<id>/"]
    assert server_page is not None and server_page[1] == figures["pages_small"]["/servers/<id>/"][1]


def test_the_listing_packs_every_gpu_at_most_once():
    bench = _bench_module()
    jobs = bench.pack(0, 100, 200, 1)
    held = [
        (n, g) for j in jobs for n in j.nodes for g in range(j.first, j.first + j.gpus_per_node)
    ]
    assert len(held) == len(set(held)) and all(0 <= g < bench.GPUS for _, g in held)
    assert {len(j.nodes) for j in jobs} == {1, 2, 4}
    assert bench.hostlist((4, 5)) == "gpu[00004-00005]"


def test_the_listing_parses_to_the_records_the_bench_applies():
    """The JSON and the records are one listing: the real parser's records digest alike."""
    from workloads.parsers.detect import parse_jobs_document
    from workloads.services.apply import record_digest

    bench = _bench_module()
    listing = bench.Listing()
    listing.add(bench.pack(0, 20, 40, 1))
    parsed = parse_jobs_document(json.loads(listing.raw(bench.EPOCH)))
    mine = {r.scheduler_id: record_digest(r) for r in listing.snapshot().workloads}
    assert {r.scheduler_id: record_digest(r) for r in parsed.workloads} == mine
