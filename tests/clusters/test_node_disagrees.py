"""The nodes page's amber row: the rule alone, without a database."""

from __future__ import annotations

import pytest

from clusters.selectors import node_disagrees

AGREES = {
    "open_findings": 0,
    "bound": True,
    "pci_gpu_count": 8,
    "agent_gpu_count": 8,
    "expected_gpus": 8,
}


def test_a_bound_node_whose_counts_agree_is_not_flagged():
    assert node_disagrees(**AGREES) is False


def test_unknown_pci_count_and_profile_are_no_disagreement():
    assert node_disagrees(**{**AGREES, "pci_gpu_count": None, "expected_gpus": None}) is False


@pytest.mark.parametrize(
    "change",
    [
        {"open_findings": 1},
        {"bound": False},
        {"pci_gpu_count": 9},  # a GPU on the bus that NVML does not see
        {"expected_gpus": 9},  # fewer GPUs than the hardware profile
    ],
)
def test_each_cause_flags_the_node(change):
    assert node_disagrees(**{**AGREES, **change}) is True
