"""GPU catalogue: canonical names, memory, FP8 support and seed prices (spring 2026, $/GPU-hour).

Canonical names are what tiers.yaml uses (``gpu: H100-SXM5-80GB``); ``normalize_gpu`` accepts common
spellings. Providers map their own names onto these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuInfo:
    name: str
    memory_gb: float
    bandwidth_gbps: float  # HBM/GDDR bandwidth, GB/s
    fp8: bool  # FP8 weights and KV cache supported in hardware (Hopper, Ada, Blackwell)
    on_demand_per_hour: float  # seed price per GPU, used by the simulated cloud and `scalectl plan`
    spot_per_hour: float | None
    aliases: tuple[str, ...] = ()


GPUS: dict[str, GpuInfo] = {
    g.name: g
    for g in (
        GpuInfo("L40S-48GB", 48, 864, True, 0.72, None, ("L40S",)),
        GpuInfo("A100-40GB-PCIe", 40, 1555, False, 0.90, 0.80, ("A100-40GB", "A100 40GB")),
        GpuInfo("A100-80GB-PCIe", 80, 1935, False, 1.04, 1.14, ("A100", "A100-80GB", "A100 80GB PCIe")),
        GpuInfo("A100-80GB-SXM4", 80, 2039, False, 1.29, 0.99, ("A100-SXM4", "A100 SXM4 80GB")),
        GpuInfo("A100-40GB-SXM4", 40, 1555, False, 1.29, None, ("A100 SXM4 40GB",)),
        GpuInfo("H100-PCIe-80GB", 80, 2039, True, 2.51, None, ("H100-PCIe", "H100 PCIe")),
        GpuInfo("H100-SXM5-80GB", 80, 3350, True, 2.40, 0.99, ("H100", "H100-SXM", "H100 SXM5", "H100-SXM5")),
        GpuInfo("H200-141GB", 141, 4800, True, 3.70, None, ("H200", "H200-SXM")),
        GpuInfo("B200-192GB", 192, 8000, True, 5.50, 2.01, ("B200",)),
        GpuInfo("RTX4090-24GB", 24, 1008, True, 0.39, 0.25, ("RTX4090", "RTX 4090")),
        GpuInfo("RTX5090-32GB", 32, 1792, True, 0.69, 0.45, ("RTX5090", "RTX 5090")),
    )
}


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_BY_SQUASHED = {_squash(alias): g.name for g in GPUS.values() for alias in (g.name, *g.aliases)}


class UnknownGpu(ValueError):
    pass


def normalize_gpu(name: str) -> str:
    """Canonical name for a GPU spelling ("h100 sxm5" -> "H100-SXM5-80GB"); UnknownGpu lists the options."""
    found = _BY_SQUASHED.get(_squash(name))
    if found is None:
        raise UnknownGpu(f"unknown GPU {name!r}; known: {', '.join(GPUS)}")
    return found


def gpu_info(name: str) -> GpuInfo:
    return GPUS[normalize_gpu(name)]
