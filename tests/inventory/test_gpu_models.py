"""One GPU model rule for placement's filter and the findings' label check."""

from __future__ import annotations

import pytest

from inventory.gpu_models import gpu_model_matches, gpu_models_agree, model_key, model_words

H100 = "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(
    ("label", "name", "agree"),
    [
        ("NVIDIA-H100-80GB-HBM3", H100, True),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "NVIDIA A100-SXM4-40GB", True),
        ("h100", H100, True),
        ("NVlink_A100_40GB", "NVIDIA A100-SXM4-40GB", True),
        ("tesla_v100-sxm3-32gb", "Tesla V100-SXM3-32GB", True),
        ("Tesla-T4-SHARED", "Tesla T4", True),
        ("NVIDIA-GeForce-RTX-4090", "NVIDIA GeForce RTX 4090", True),
        ("h100_80gb_hbm3_sxm5", H100, True),
        ("NVIDIA-A100-SXM4-80GB", H100, False),
        ("a100_40gb", "NVIDIA A100-SXM4-80GB", False),
        ("l40s", H100, False),
    ],
)
def test_scheduler_labels_agree_with_the_agents_names(label, name, agree):
    assert gpu_models_agree(label, name) is agree
    assert gpu_models_agree(name, label) is agree


@pytest.mark.parametrize(
    ("query", "name", "matches"),
    [
        ("H100", H100, True),
        ("h100 hbm3", H100, True),
        ("h100 80gb hbm3", H100, True),
        ("NVIDIA", H100, True),
        ("H100 PCIe", H100, False),
        ("H100 PCIe", "NVIDIA H100 PCIe", True),
        ("L40S", H100, False),
        ("RTX 4090", "NVIDIA GeForce RTX 4090", True),
        ("RTX 4090", "NVIDIA GeForce RTX 3090", False),
        ("H100", "", False),
    ],
)
def test_a_request_names_only_gpus_with_every_model_word(query, name, matches):
    assert gpu_model_matches(query, name) is matches


def test_a_request_more_precise_than_a_gres_type_agrees_but_does_not_match():
    assert not gpu_model_matches("H100 80GB", "h100")
    assert gpu_models_agree("H100 80GB", "h100")


def test_words_and_keys():
    assert model_words("NVlink_A100_40GB") == ("a100", "40gb")
    assert model_words("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb") == ("a100", "sxm4", "40gb")
    assert model_key("NVIDIA A100-SXM4-40GB") == model_key("nvidia a100 sxm4 40gb")
