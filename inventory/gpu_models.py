"""GPU model names: one rule for whether a description names a GPU.

NVML names a GPU `NVIDIA H100 80GB HBM3`; GFD labels write `NVIDIA-H100-80GB-HBM3` (and
`...-MIG-1g.10gb`, `...-SHARED`); Slurm admins write GRES types such as `h100`,
`NVlink_A100_40GB` or `tesla_v100-sxm3-32gb`; people ask placement for `H100` or
`h100 hbm3`. A description names a GPU when every one of its model words is in the GPU's
name, punctuation and case aside: `H100 PCIe` does not name `NVIDIA H100 80GB HBM3` (the SXM
and PCIe parts differ). Brand words that NVML names may lack (`tesla`, `nvlink`) and the
MIG or sharing suffix of a label name no model. Pure functions: placement filters GPUs with
them, findings compare a scheduler's label with the agent's names.
"""

from __future__ import annotations

import functools
import re

NON_MODEL_WORDS = frozenset({"nvidia", "tesla", "nvlink", "shared"})
"""Words of labels and GRES types that say nothing about which GPU it is."""
_MIG_SUFFIX = re.compile(r"[-_ ]mig[-_ ].*$", re.IGNORECASE)
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def model_key(name: str | None) -> str:
    """`NVIDIA A100-SXM4-40GB` -> `nvidiaa100sxm440gb`: one spelling, to compare and dedupe."""
    return _NOT_ALNUM.sub("", (name or "").lower())


def model_words(description: str | None) -> tuple[str, ...]:
    """`NVlink_A100_40GB` -> ("a100", "40gb"); `NVIDIA-A100-SXM4-40GB-MIG-1g.5gb` ->
    ("a100", "sxm4", "40gb"): the words of a description that name the model."""
    text = _MIG_SUFFIX.sub("", description or "").lower()
    return tuple(w for w in _NOT_ALNUM.split(text) if w and w not in NON_MODEL_WORDS)


@functools.lru_cache(maxsize=4096)
def gpu_model_matches(description: str, name: str) -> bool:
    """Every model word of the description is in the GPU's name: `H100` and `h100 80gb hbm3`
    match `NVIDIA H100 80GB HBM3`; `H100 PCIe` does not. A description without a model word
    (`NVIDIA`) matches every named GPU. Cached: placement asks it for every GPU of a fleet."""
    target = model_key(name)
    return bool(target) and all(w in target for w in model_words(description))


def gpu_models_agree(first: str, second: str) -> bool:
    """Two descriptions of the same GPUs when either names the other: a GRES type `h100`
    and the NVML name `NVIDIA H100 80GB HBM3`, or a request for `H100 80GB` and a node whose
    only word is the type `h100`. `a100_40gb` and an A100 80GB do not agree."""
    return gpu_model_matches(first, second) or gpu_model_matches(second, first)
