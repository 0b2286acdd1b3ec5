"""How finding messages say things: counts, MIG layouts, schedulers, the agent's view."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from inventory.gpu_models import gpu_models_agree

from ..choices import ClusterKind
from .types import ServerFacts


def plural(n: int, word: str) -> str:
    """`1 GPU`, `3 GPUs`."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def profile_text(profiles: Mapping[str, int]) -> str:
    """`2x 1g.10gb, 1x 3g.40gb`, or `none`."""
    return ", ".join(f"{n}x {p}" for p, n in sorted(profiles.items())) or "none"


def scheduler_name(kind: str) -> str:
    return "Kubernetes" if kind == ClusterKind.KUBERNETES else "Slurm"


def agent_gpus(server: ServerFacts) -> str:
    """What the agent counts, for count messages: `the server has 8 (2 in MIG mode, ...)`."""
    if server.nvml_error and not server.gpus:
        return f"the agent sees none (NVML: {server.nvml_error})"
    return f"the server has {server.gpus}" + (
        f" ({server.mig_gpus} in MIG mode, {plural(server.mig_devices, 'MIG device')})"
        if server.mig_gpus
        else ""
    )


def model_fits(label: str, gpu_names: Iterable[str]) -> bool:
    """A scheduler's GPU name (GFD product label, Slurm GRES type) agrees with one of the
    agent's NVML names."""
    return any(gpu_models_agree(label, name) for name in gpu_names)
