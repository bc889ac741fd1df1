"""GPU catalogue: canonical names, memory, bandwidth, FP8 support, compute capability and seed prices.

Canonical names are what tiers.yaml uses (``gpu: H100-SXM5-80GB``); ``normalize_gpu`` accepts common
spellings. Providers map their own names onto these.

Units: ``memory_gb`` is the marketing figure, which for HBM/GDDR parts is binary (an "80 GB" H100 has
80 GiB of HBM3; nvidia-smi shows ~79.6 GiB usable). ``memory_bytes`` therefore uses 2**30 per GB. Prices
are seed $/GPU-hour (spring 2026), used by the simulated cloud and ``scalectl plan``. TFLOPS are dense
tensor-core peaks (no sparsity) from the spec sheets: inputs to the engine model (``scalectl.sizing.engine``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

GIB = 1024**3

# vLLM runs FP8 (W8A8 weights, FP8 KV cache) natively from compute capability 8.9 (Ada, Hopper, Blackwell).
FP8_MIN_COMPUTE_CAPABILITY = (8, 9)


@dataclass(frozen=True, slots=True)
class GpuInfo:
    name: str
    memory_gb: float
    bandwidth_gbps: float  # HBM/GDDR bandwidth, GB/s
    fp8: bool  # FP8 weights and KV cache supported in hardware (Hopper, Ada, Blackwell)
    on_demand_per_hour: float  # seed price per GPU, used by the simulated cloud and `scalectl plan`
    spot_per_hour: float | None
    aliases: tuple[str, ...] = ()
    compute_capability: tuple[int, int] = (0, 0)
    architecture: str = ""
    bf16_tflops: float = 0.0  # dense tensor-core peak (no sparsity), spec sheet: the engine model's compute
    fp8_tflops: float | None = None  # None: no FP8 tensor cores

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gb * GIB)

    @property
    def compute_capability_str(self) -> str:
        return f"{self.compute_capability[0]}.{self.compute_capability[1]}"


GPUS: dict[str, GpuInfo] = {
    g.name: g
    for g in (
        GpuInfo("L40S-48GB", 48, 864, True, 0.72, None, ("L40S",), (8, 9), "Ada", 362.0, 733.0),
        GpuInfo("A100-40GB-PCIe", 40, 1555, False, 0.90, 0.80, ("A100-40GB", "A100 40GB"), (8, 0), "Ampere", 312.0),
        # Spot: RunPod's A100 PCIe 80GB spot/on-demand ratio in its March 2026 price list (spot $1.19,
        # on-demand $2.10; deploybase.ai "RunPod GPU Pricing", 2026-03-10) applied to our $1.04 seed.
        # The old seed ($1.14, above on-demand) had no source and sent spot tiers to on-demand.
        GpuInfo(
            "A100-80GB-PCIe",
            80,
            1935,
            False,
            1.04,
            0.59,
            ("A100", "A100-80GB", "A100 80GB PCIe"),
            (8, 0),
            "Ampere",
            312.0,
        ),
        GpuInfo(
            "A100-80GB-SXM4", 80, 2039, False, 1.29, 0.99, ("A100-SXM4", "A100 SXM4 80GB"), (8, 0), "Ampere", 312.0
        ),
        GpuInfo("A100-40GB-SXM4", 40, 1555, False, 1.29, None, ("A100 SXM4 40GB",), (8, 0), "Ampere", 312.0),
        GpuInfo(
            "H100-PCIe-80GB", 80, 2039, True, 2.51, None, ("H100-PCIe", "H100 PCIe"), (9, 0), "Hopper", 756.0, 1513.0
        ),
        GpuInfo(
            "H100-SXM5-80GB",
            80,
            3350,
            True,
            2.40,
            0.99,
            ("H100", "H100-SXM", "H100 SXM5", "H100-SXM5"),
            (9, 0),
            "Hopper",
            989.0,
            1979.0,
        ),
        GpuInfo("H200-141GB", 141, 4800, True, 3.70, None, ("H200", "H200-SXM"), (9, 0), "Hopper", 989.0, 1979.0),
        GpuInfo("B200-192GB", 192, 8000, True, 5.50, 2.01, ("B200",), (10, 0), "Blackwell", 2250.0, 4500.0),
        GpuInfo("RTX4090-24GB", 24, 1008, True, 0.39, 0.25, ("RTX4090", "RTX 4090"), (8, 9), "Ada", 165.0, 330.0),
        GpuInfo(
            "RTX5090-32GB", 32, 1792, True, 0.69, 0.45, ("RTX5090", "RTX 5090"), (12, 0), "Blackwell", 209.0, 419.0
        ),
    )
}


# GPUs whose spot seed price is NOT below on-demand, each with the source that says so. Empty: every
# spot seed is below its on-demand seed (checked by tests/unit/sizing/test_catalogue_prices.py).
SPOT_NOT_CHEAPER_SOURCES: dict[str, str] = {}


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_BY_SQUASHED = {_squash(alias): g.name for g in GPUS.values() for alias in (g.name, *g.aliases)}


def _tokens(name: str) -> frozenset[str]:
    """Order-free words of a spelling, "80G" read as "80GB": "A100 80G PCIe" = "a100-pcie-80gb"."""
    words = re.findall(r"[a-z]+\d*|\d+[a-z]*", name.lower())
    return frozenset(re.sub(r"^(\d+)g$", r"\1gb", w) for w in words)


def _token_index() -> dict[frozenset[str], str]:
    index: dict[frozenset[str], str] = {}
    for g in GPUS.values():
        for alias in (g.name, *g.aliases):
            tokens = _tokens(alias)
            if index.setdefault(tokens, g.name) != g.name:
                raise AssertionError(f"GPU spellings collide: {alias!r} ({g.name}) and {index[tokens]}")
    return index


_BY_TOKENS = _token_index()


class UnknownGpu(ValueError):
    pass


def normalize_gpu(name: str) -> str:
    """Canonical name for a GPU spelling ("h100 sxm5" -> "H100-SXM5-80GB"); UnknownGpu lists the options."""
    found = _BY_SQUASHED.get(_squash(name)) or _BY_TOKENS.get(_tokens(name))
    if found is None:
        raise UnknownGpu(f"unknown GPU {name!r}; {did_you_mean(name, GPUS)}known: {', '.join(GPUS)}")
    return found


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """ "did you mean X? " for the closest catalogue names to a misspelling (case ignored), or ""."""
    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=2, cutoff=0.6)
    return f"did you mean {' or '.join(by_lower[c] for c in close)}? " if close else ""


def gpu_info(name: str) -> GpuInfo:
    return GPUS[normalize_gpu(name)]


def supports_fp8(gpu: GpuInfo) -> bool:
    """FP8 weights and FP8 KV cache in vLLM: compute capability >= 8.9 (the A100, 8.0, does not qualify)."""
    return gpu.fp8 and gpu.compute_capability >= FP8_MIN_COMPUTE_CAPABILITY


def fp8_gpus() -> list[str]:
    return [g.name for g in GPUS.values() if supports_fp8(g)]
