"""Data the instance model needs beyond ``sizing.gpus``: model architectures and GPU compute peaks.

Figures are public spec-sheet values (dense, no sparsity). They are inputs to a roofline-style model,
whose effective efficiencies are calibrated once (see ``instance_model.ENGINE_EFFICIENCY``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ModelArch:
    """What the step-time and KV-cache math needs to know about a model."""

    name: str
    params_b: float  # parameters, billions
    layers: int
    kv_heads: int
    head_dim: int
    aliases: tuple[str, ...] = ()


MODELS: dict[str, ModelArch] = {
    m.name: m
    for m in (
        ModelArch("llama-3.1-8b", 8.03, 32, 8, 128, ("meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B")),
        ModelArch("llama-3.1-70b", 70.6, 80, 8, 128, ("meta-llama/Llama-3.1-70B-Instruct", "Llama-3.1-70B")),
        ModelArch("mistral-7b", 7.24, 32, 8, 128, ("mistralai/Mistral-7B-Instruct-v0.3",)),
        ModelArch("qwen2.5-14b", 14.7, 48, 8, 128, ("Qwen/Qwen2.5-14B-Instruct",)),
    )
}

# Dense tensor-core peaks in TFLOPS: (bf16, fp8 or None when the GPU has no FP8 tensor cores).
GPU_TFLOPS: dict[str, tuple[float, float | None]] = {
    "L40S-48GB": (362.0, 733.0),
    "A100-40GB-PCIe": (312.0, None),
    "A100-80GB-PCIe": (312.0, None),
    "A100-80GB-SXM4": (312.0, None),
    "H100-PCIe-80GB": (756.0, 1513.0),
    "H100-SXM5-80GB": (989.0, 1979.0),
    "H200-141GB": (989.0, 1979.0),
    "B200-192GB": (2250.0, 4500.0),
    "RTX4090-24GB": (165.0, 330.0),
    "RTX5090-32GB": (209.0, 419.0),
}


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", name.lower().rsplit("/", 1)[-1]).replace("instruct", "")


_BY_SQUASHED = {_squash(alias): m.name for m in MODELS.values() for alias in (m.name, *m.aliases)}


class UnknownModel(ValueError):
    pass


def model_arch(name: str) -> ModelArch:
    """Architecture for a model id ("meta-llama/Llama-3.1-8B-Instruct" or "llama-3.1-8b")."""
    found = _BY_SQUASHED.get(_squash(name))
    if found is None:
        raise UnknownModel(f"no architecture for model {name!r} in the simulator catalogue; known: {', '.join(MODELS)}")
    return MODELS[found]
