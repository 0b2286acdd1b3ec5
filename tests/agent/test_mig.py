"""MIG profile names: one reading of every spelling, shared by the agent and the backend."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent.mig import (
    derive_mig_profile,
    mig_profile_name,
    mig_slices,
    normalize_mig_profile,
    parse_mig_profile,
)


@pytest.mark.parametrize(
    ("value", "profile"),
    [
        ("mig-1g.10gb", "1g.10gb"),
        ("nvidia.com/mig-3g.40gb", "3g.40gb"),
        ("nvidia_a100_1g.5gb", "1g.5gb"),
        ("a100_3g.20gb", "3g.20gb"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "1g.5gb"),
        ("MIG 1c.3g.40gb", "1c.3g.40gb"),
        ("1G.10GB+me", "1g.10gb"),
        ("h100", None),
        ("", None),
        (None, None),
    ],
)
def test_scheduler_spellings_normalise_to_one_profile(value, profile):
    assert normalize_mig_profile(value) == profile


@pytest.mark.parametrize(
    ("profile", "parsed"),
    [
        ("1g.10gb", ("1g.10gb", 1, 1)),
        ("1c.3g.40gb", ("3g.40gb", 3, 1)),
        ("7g.80gb", ("7g.80gb", 7, 7)),
        ("1g.10gb+me", ("1g.10gb+me", 1, 1)),
        ("MIG 2g.20gb", ("MIG 2g.20gb", None, None)),
        ("1g.10gb extra", ("1g.10gb extra", None, None)),
        ("", ("", None, None)),
    ],
)
def test_parse_mig_profile(profile, parsed):
    assert parse_mig_profile(profile) == parsed


def test_nvml_prefix_is_dropped_and_empty_names_are_unknown():
    assert mig_profile_name("MIG 1g.10gb") == "1g.10gb"
    assert mig_profile_name("mig  3g.40gb ") == "3g.40gb"
    assert mig_profile_name("2g.20gb") == "2g.20gb"
    assert mig_profile_name(" ") is None and mig_profile_name(None) is None


def test_a30_has_four_slices_and_the_others_seven_and_eight():
    assert mig_slices("NVIDIA A30") == (4, 4)
    assert mig_slices("NVIDIA H100 80GB HBM3") == (7, 8) and mig_slices(None) == (7, 8)


def test_derived_compute_instance_names_read_back_as_their_gpu_instance():
    """A compute instance smaller than its GPU instance (20 of an H100 3g.40gb's 60 SMs)."""
    name = derive_mig_profile("NVIDIA H100 80GB HBM3", "Hopper", 40448, 20, 60)
    assert name == "1c.3g.40gb"
    assert parse_mig_profile(name) == ("3g.40gb", 3, 1)
    assert normalize_mig_profile(name) == name


def test_the_module_imports_without_django():
    code = "import sys, agent.mig; assert 'django' not in sys.modules, 'django imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
