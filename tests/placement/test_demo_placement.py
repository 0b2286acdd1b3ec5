"""The demo's 16-GPU Slurm request keeps to one GPU model, or says it mixes (issue 15 §5)."""

import pytest
from django.core.management import call_command

from placement.service import placement_find


@pytest.mark.django_db(transaction=True)
def test_the_demo_16_gpu_slurm_job_prefers_one_model_or_says_it_mixes(api):
    call_command("demo")
    result = placement_find(cluster="hpc-slurm", gpus=16)
    # No one model has 16 free GPUs on the demo's Slurm nodes: it fits only by mixing, and says so.
    assert result.fits and len(result.models) == 3
    assert "slowest GPU's pace" in result.cost
    eight = placement_find(
        cluster="hpc-slurm", gpus=8
    )  # this one fits in one model: it keeps to it
    assert eight.fits and len(eight.models) == 1 and "slowest" not in (eight.cost or "")
    assert result.nodes[0].node != "dgx-h100-10"  # its lost GPU is critical: ranked last
    body = api.get("/api/v1/placement/", {"cluster": "hpc-slurm", "gpus": 16}).json()
    assert body["models"] == result.models and body["cost"] == result.cost
    assert all("_" not in b["reason_text"] for b in body["blocked"])
    assert "model" not in body["blocked_counts"]
    mixed = placement_find(cluster="hpc-slurm", gpus=16, mix_models=True)
    assert mixed.fits and mixed.models == result.models
