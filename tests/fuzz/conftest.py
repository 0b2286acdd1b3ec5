"""The fuzzing tier: bounded for CI, longer with ATLAS_FUZZ_EXAMPLES.

A tally of cases and server errors is printed at the end of the session (`-s` not needed),
so a run's figures can be quoted.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

FUZZ_EXAMPLES = int(os.environ.get("ATLAS_FUZZ_EXAMPLES", "0") or 0)
# Survey mode counts every failure instead of stopping at the first (for before/after figures).
SURVEY = os.environ.get("ATLAS_FUZZ_SURVEY", "") == "1"
TALLY: Counter[str] = Counter()


def examples(ci_default: int) -> int:
    """Examples per operation or strategy: the CI default unless ATLAS_FUZZ_EXAMPLES says more."""
    return FUZZ_EXAMPLES or ci_default


def pytest_terminal_summary(terminalreporter) -> None:
    if TALLY:
        for key, count in sorted(TALLY.items()):
            terminalreporter.write_line(f"fuzzing tally: {key}: {count}")


@pytest.fixture
def fleet(db):
    """A small fleet (one server, a Kubernetes and a Slurm cluster) so ids in paths exist."""
    from clusters.services import snapshot_ingest
    from tests.nodes import k8s_node, k8s_node_list, scontrol_node
    from tests.reports import apply_reports, make_report

    report = make_report("dgx-01", gpus=2, nics=1, mig_gpus={1: ["3g.40gb", "3g.40gb"]})
    servers = apply_reports(report)
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(k8s_node("dgx-01", system_uuid=report["host"]["system_uuid"])),
    )
    snapshot_ingest(cluster_name="hpc", raw=scontrol_node("gpu-01"))
    return servers
