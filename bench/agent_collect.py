"""Benchmark: the agent's own cost per collection, and of parsing saved nvidia-smi output.

Each figure stands beside a baseline measured in the same run:

- one collection on the 8-GPU fake profile (8x H100, NVSwitch, 9 NICs, a materialised /sys
  tree), against `json.dumps` of the report it produced (the least any agent must spend);
- parsing the biggest saved `nvidia-smi -q -x` sample, against a bare ElementTree parse of
  the same bytes; and the 8-GPU `nvidia-smi -q` text sample against splitting it into lines;
- with a GPU and driver present (or --live), the real collector against `nvidia-smi -q -x`.

Time is the median of repeated runs; peak memory is tracemalloc's peak for one run.

    python bench/agent_collect.py [--repeat N] [--live]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent.collector import collect  # noqa: E402
from agent.host import SysHost  # noqa: E402
from agent.nvml import PynvmlBackend  # noqa: E402
from agent.sources.nvidia_smi_text import parse_nvidia_smi_text  # noqa: E402
from agent.sources.nvidia_smi_xml import parse_nvidia_smi_xml  # noqa: E402
from simulator.fake_nvml import FakeNvmlBackend, fake_runner, materialize  # noqa: E402
from simulator.profiles import build  # noqa: E402


def samples_dir() -> Path:
    configured = os.environ.get("ATLAS_SAMPLES_DIR")
    if configured:
        return Path(configured)
    shared = REPO.parent / "shared" / "samples"
    return shared if shared.is_dir() else REPO / "tests" / "fixtures" / "samples"


def measure(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(median seconds, peak bytes of one traced run)."""
    fn()  # warm caches and imports
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return statistics.median(times), peak


def row(
    name: str, figure: tuple[float, float], baseline_name: str, baseline: tuple[float, float]
) -> None:
    (t, m), (bt, bm) = figure, baseline
    print(
        f"{name:<44} {t * 1000:9.2f} ms {m / 1024:9.0f} KiB   |  {baseline_name:<30} "
        f"{bt * 1000:8.2f} ms {bm / 1024:8.0f} KiB   x{t / bt if bt else float('inf'):.1f} time"
    )


def bench_fake_collection(repeat: int) -> None:
    machine = build("h100", seed=0)
    scratch = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    root = Path(tempfile.mkdtemp(prefix="atlas-bench-", dir=scratch))
    try:
        materialize(machine, root)
        backend = FakeNvmlBackend(machine)
        host = SysHost(root, run=fake_runner(machine))
        report = collect(backend, host)
        figure = measure(lambda: collect(backend, host), repeat)
        baseline = measure(lambda: json.dumps(report), repeat)
        size = len(json.dumps(report))
        row(
            f"collect, 8x H100 fake ({size // 1024} KiB report)",
            figure,
            "json.dumps(report)",
            baseline,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bench_parsers(repeat: int) -> None:
    folder = samples_dir()
    xml_files = sorted(folder.glob("nvsmi-q-x-*.xml"), key=lambda p: p.stat().st_size)
    if xml_files:
        biggest = xml_files[-1]
        data = biggest.read_bytes()
        figure = measure(lambda: parse_nvidia_smi_xml(data), repeat)
        baseline = measure(lambda: ET.fromstring(data), repeat)
        row(
            f"parse -q -x ({biggest.name[:24]}, {len(data) // 1024} KiB)",
            figure,
            "ElementTree.fromstring",
            baseline,
        )
    text_file = folder / "nvsmi-q-h100x8-gpud.txt"
    if text_file.is_file():
        text = text_file.read_text()
        figure = measure(lambda: parse_nvidia_smi_text(text), repeat)
        baseline = measure(lambda: [line.split(":", 1) for line in text.splitlines()], repeat)
        row(
            f"parse -q text (8x H100, {len(text) // 1024} KiB)",
            figure,
            "split lines on ':'",
            baseline,
        )


def bench_live(repeat: int) -> None:
    """The real collector on this machine's GPUs against `nvidia-smi -q -x`."""
    smi = shutil.which("nvidia-smi")
    backend = PynvmlBackend()
    host = SysHost("/")
    first = collect(backend, host)
    if first["nvml_error"] or not smi:
        print(f"live: skipped ({first['nvml_error'] or 'no nvidia-smi'})")
        return
    figure = measure(lambda: collect(backend, host), repeat)
    start = time.perf_counter()
    for _ in range(repeat):
        subprocess.run([smi, "-q", "-x"], capture_output=True, check=True)
    smi_time = (time.perf_counter() - start) / repeat
    row(
        f"collect, live NVML ({len(first['gpus'])} GPUs)",
        figure,
        "nvidia-smi -q -x (process)",
        (smi_time, 0.0),
    )
    print(
        json.dumps(
            {
                "gpus": [(g["name"], g["uuid"]) for g in first["gpus"]],
                "driver": first["driver"],
                "links": len(first["links"]),
            }
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--live", action="store_true", help="also time the real NVML collector")
    args = parser.parse_args()
    print(f"{'what':<44} {'time':>12} {'peak':>13}   |  {'baseline':<30} {'time':>11} {'peak':>12}")
    bench_fake_collection(args.repeat)
    bench_parsers(args.repeat)
    if args.live or shutil.which("nvidia-smi"):
        bench_live(max(3, args.repeat // 10))
    return 0


if __name__ == "__main__":
    sys.exit(main())
