"""One simulated server's report: the agent's real collector run on fake inputs.

The machine's /sys tree is materialised in a scratch folder, its commands answered by a
fake runner and NVML by the fake backend, so the report is exactly what the agent would
send from such a machine.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from agent.collector import collect
from agent.host import SysHost

from .fake_nvml import FakeMachine, FakeNvmlBackend, fake_runner, materialize


def _scratch() -> str | None:
    """Memory-backed scratch space when there is one: a fake /sys is hundreds of tiny files."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def simulate_report(machine: FakeMachine, *, collected_at: str | None = None) -> dict[str, Any]:
    """The report the agent would send from `machine` (the real collector, fake inputs)."""
    with tempfile.TemporaryDirectory(prefix="atlas-sim-", dir=_scratch()) as root:
        materialize(machine, root)
        host = SysHost(root, run=fake_runner(machine))
        return collect(FakeNvmlBackend(machine), host, collected_at=collected_at)
