"""What a boot is made of: from a create call to a vLLM server that answers, part by part.

A boot is six parts, each drawn on its own (uniform between a low and a high figure, each from a public
source; docs/simulator.md "What a boot is made of" lists them):

* provision — create → the machine is up (the provider reports it running), per provider type;
* image_pull — the serving image reaching the machine: image bytes ÷ pull bandwidth;
* weights_download — the checkpoint from the Hugging Face Hub: checkpoint bytes ÷ download bandwidth;
* weights_load — the checkpoint from local disk into GPU memory: checkpoint bytes ÷ read bandwidth;
* compile — vLLM's torch.compile (or, on the cached path, loading its compile cache);
* warmup — memory profiling, CUDA graph capture and the API server's start.

The checkpoint is what the Hub serves: BF16 for the catalogue's models (vLLM's ``--quantization fp8``
quantizes it while loading, so FP8 serving still downloads and reads the BF16 bytes), the pre-quantized
weights for models that ship them (gpt-oss). Two paths: ``cold`` (a fresh machine: everything) and
``cached`` (the image pre-pulled, and the weights and the torch.compile cache on a local or persistent disk:
no pull, no download, the compile cache loaded instead of compiling).

Pure: figures in, durations out. A draw takes one ``random.Random`` and always consumes the same six
numbers in the same order, so a cold and a cached draw from equal streams differ by exactly the parts the
cached path skips or shortens.
"""

from __future__ import annotations

import functools
import math
import random
from dataclasses import asdict, dataclass, fields, replace
from typing import Literal

from scalectl.sizing.models import ModelInfo

BootPath = Literal["cold", "cached"]
BOOT_PATHS: tuple[BootPath, ...] = ("cold", "cached")

MB = 1_000_000
GB = 1_000_000_000
BF16_BYTES = 2  # published checkpoints of the catalogue's dense models are BF16


@dataclass(frozen=True, slots=True)
class Span:
    """A figure drawn uniformly between ``low`` and ``high`` (equal: fixed)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if not (0 < self.low <= self.high) or not math.isfinite(self.high):
            raise ValueError(f"expected 0 < low <= high, got [{self.low:g}, {self.high:g}]")

    def at(self, u: float) -> float:
        return self.low + u * (self.high - self.low)

    @property
    def mean(self) -> float:
        return (self.low + self.high) / 2

    def mean_inverse(self) -> float:
        """E[1 / X] for X uniform on the span (a duration that is bytes ÷ a uniform bandwidth)."""
        if self.high == self.low:
            return 1.0 / self.low
        return math.log(self.high / self.low) / (self.high - self.low)


# ---- provisioning per provider type (create → machine up) -------------------------------------------------
# Sources in docs/simulator.md. A provider type not listed is a GPU VM of unknown speed: the generic span,
# from AWS's measured ~30 s to Lambda's documented 5 minutes.
GENERIC_VM = Span(30.0, 300.0)
PROVISION: dict[str, Span] = {
    "aws": Span(25.0, 90.0),  # EC2 API + pending→running + OS boot ~26-29 s measured; GPU types slower
    "lambda": Span(180.0, 300.0),  # single-GPU instance ready in 3-5 minutes
    "runpod": Span(30.0, 120.0),  # a GPU pod ready in 30-120 s
    "vastai": Span(30.0, 120.0),  # a container on a running host, as RunPod's pods (no published figure)
}
MULTI_GPU_PROVISION: dict[str, tuple[int, Span]] = {
    "lambda": (8, Span(600.0, 900.0)),  # 8x instances: 10-15 minutes
}


# ---- a start after a stop (start → machine up), per provider type -------------------------------------
# A stopped machine keeps its disk: the image, the weights and the torch.compile cache are there, so a
# resume is this start, then the cached path's load, cached compile and warm-up (``resume_model``). Sources
# in docs/simulator.md ("What a resume is made of").
GENERIC_START = Span(21.0, 74.0)  # a VM started again, as EC2's: the only measured VM start
START: dict[str, Span] = {
    "aws": Span(21.0, 74.0),  # 21.2 s start → SSH measured (18% under a cold launch); GPU types: 90 s less 18%
    "runpod": Span(5.0, 30.0),  # a container restarted on its host (no published figure): as Vast.ai's
    "vastai": Span(5.0, 30.0),  # a start still "scheduling" after 30 s has no GPU on its host (docs.vast.ai)
}


def start_span(provider_type: str) -> Span:
    """Start of a stopped machine → machine up, for a provider type."""
    return START.get(provider_type, GENERIC_START)


def provision_span(provider_type: str, gpu_count: int = 1) -> Span:
    """Create → machine up for a provider type (and, where a provider documents it, a GPU count)."""
    multi = MULTI_GPU_PROVISION.get(provider_type)
    if multi is not None and gpu_count >= multi[0]:
        return multi[1]
    return PROVISION.get(provider_type, GENERIC_VM)


@dataclass(frozen=True, slots=True)
class BootFigures:
    """Every figure but provisioning (which is per provider): sizes in bytes, bandwidths in bytes/s,
    durations in seconds."""

    image_bytes: float = 12 * GB  # vllm/vllm-openai, as pulled
    pull_bandwidth: Span = Span(25 * MB, 100 * MB)  # a 12 GB ML image: 2-8 min (download, unpack)
    download_bandwidth: Span = Span(150 * MB, 500 * MB)  # the Hub: plain client .. hf_transfer's ~500 MB/s
    load_bandwidth: Span = Span(1 * GB, 2 * GB)  # safetensors from local NVMe: 1.6-1.9 GB/s measured
    compile: Span = Span(20.0, 60.0)  # torch.compile, no cache: 28.8 s logged for an 8B on H100
    compile_cached: Span = Span(5.0, 20.0)  # loading the torch.compile cache
    warmup: Span = Span(20.0, 60.0)  # profiling, CUDA graph capture (14-17 s), API server start

    def __post_init__(self) -> None:
        if not (self.image_bytes > 0 and math.isfinite(self.image_bytes)):
            raise ValueError(f"image_bytes must be above 0, got {self.image_bytes:g}")


DEFAULT_FIGURES = BootFigures()


@dataclass(frozen=True, slots=True)
class BootParts:
    """One boot, part by part, in seconds (0: the path skips that part)."""

    provision: float
    image_pull: float
    weights_download: float
    weights_load: float
    compile: float
    warmup: float

    @property
    def total(self) -> float:
        return sum(getattr(self, f.name) for f in fields(self))

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


PART_NAMES = tuple(f.name for f in fields(BootParts))


def checkpoint_bytes(model: ModelInfo) -> float:
    """What the Hub serves and the loader reads: the shipped pre-quantized weights, else BF16."""
    if model.native_weights_bytes is not None:
        return float(model.native_weights_bytes)
    return float(model.parameters * BF16_BYTES)


@dataclass(frozen=True, slots=True)
class BootModel:
    """The boot time distribution of one (provider type, GPU count, model, path)."""

    provision: Span
    weights_bytes: float  # the checkpoint
    path: BootPath = "cold"
    figures: BootFigures = DEFAULT_FIGURES

    def draw(self, rng: random.Random) -> BootParts:
        """One boot. Always six numbers from ``rng``, in the order of ``PART_NAMES``."""
        u = [rng.random() for _ in PART_NAMES]
        return self.parts_at(u)

    def parts_at(self, u: list[float]) -> BootParts:
        """The boot at quantiles ``u`` (one per part, in ``PART_NAMES`` order) of each part's spread."""
        f, cold = self.figures, self.path == "cold"
        return BootParts(
            provision=self.provision.at(u[0]),
            image_pull=f.image_bytes / f.pull_bandwidth.at(u[1]) if cold else 0.0,
            weights_download=self.weights_bytes / f.download_bandwidth.at(u[2]) if cold else 0.0,
            weights_load=self.weights_bytes / f.load_bandwidth.at(u[3]),
            compile=(f.compile if cold else f.compile_cached).at(u[4]),
            warmup=f.warmup.at(u[5]),
        )

    def mean(self) -> float:
        """The mean boot, exactly (a bytes ÷ bandwidth part has mean bytes × E[1/bandwidth])."""
        return self.mean_parts().total

    def mean_parts(self) -> BootParts:
        f, cold = self.figures, self.path == "cold"
        return BootParts(
            provision=self.provision.mean,
            image_pull=f.image_bytes * f.pull_bandwidth.mean_inverse() if cold else 0.0,
            weights_download=self.weights_bytes * f.download_bandwidth.mean_inverse() if cold else 0.0,
            weights_load=self.weights_bytes * f.load_bandwidth.mean_inverse(),
            compile=(f.compile if cold else f.compile_cached).mean,
            warmup=f.warmup.mean,
        )

    def longest(self) -> float:
        """The longest boot the model can draw (every part at its slowest)."""
        return self.parts_at([1.0, 0.0, 0.0, 0.0, 1.0, 1.0]).total

    def quantiles(self, *qs: float, draws: int = 20_000, seed: int = 0) -> list[float]:
        """Boot-time quantiles from ``draws`` seeded draws (the sum of uniform parts has no simple form)."""
        totals = _sorted_totals(self, draws, seed)
        return [totals[min(draws - 1, max(0, math.ceil(q * draws) - 1))] for q in qs]

    def with_path(self, path: BootPath) -> BootModel:
        return replace(self, path=path)


@functools.lru_cache(maxsize=64)
def _sorted_totals(model: BootModel, draws: int, seed: int) -> tuple[float, ...]:
    """The seeded draws' totals, sorted: the same for every quantile asked of one model (a run's report
    and its warnings each asked, and 20,000 draws cost a tenth of a second)."""
    rng = random.Random(seed)
    return tuple(sorted(model.draw(rng).total for _ in range(draws)))


def boot_model(
    provider_type: str,
    gpu_count: int,
    model: ModelInfo,
    path: BootPath = "cold",
    figures: BootFigures = DEFAULT_FIGURES,
    provision: Span | None = None,
) -> BootModel:
    """The boot distribution of ``model`` on ``gpu_count`` GPUs at a provider of ``provider_type``; a given
    ``provision`` span replaces the provider's."""
    span = provision if provision is not None else provision_span(provider_type, gpu_count)
    return BootModel(span, checkpoint_bytes(model), path, figures)


def resume_model(boot: BootModel, provider_type: str) -> BootModel:
    """A stopped machine started again: the provider's start, then the cached path (its disk kept the image,
    the weights and the compile cache; the weights still load into the GPUs and the engine warms up again)."""
    return replace(boot, provision=start_span(provider_type), path="cached")
