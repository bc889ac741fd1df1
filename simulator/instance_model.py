"""vLLM on one GPU: KV-cache capacity, engine step times and the rates a batch runs at.

The physics, per engine step (continuous batching, chunked prefill, vLLM V1 scheduler):

* a decode step reads the weights and the batch's KV cache once: ``t_mem = (weights + kv_tokens × kv_bytes)
  / bandwidth``; its compute is ``batch × 2 × params`` FLOPs; the step takes ``overhead + max(t_mem, compute)``;
* prompt tokens ride in the same steps, at most ``max_num_batched_tokens − batch`` per step (the chunk), each
  costing ``2 × params`` FLOPs on top — prefill is compute-bound, decode is bandwidth-bound;
* requests are admitted while fewer than ``max_num_seqs`` run and their KV cache fits; others wait (FCFS).

Only three efficiencies are fitted (bandwidth, compute and a fixed per-step overhead), once, against the
reference case study; every GPU and model reuses them with its own spec-sheet figures. Client-side latency
that the engine never sees (HTTP, chat template, tokenisation, streaming) is a lognormal added to each request.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.catalog import GPU_TFLOPS, ModelArch, model_arch
from simulator.requests import FloatArray
from sizing.gpus import GpuInfo, gpu_info

GB = 1e9

# Fitted once on "1× H100 SXM5, Llama 3.1 8B FP8, 100 closed-loop sessions" (tests/unit/simulator/
# test_calibration.py); see docs/simulator.md for the fit and what it does not capture.
BANDWIDTH_EFFICIENCY = 0.92  # share of spec HBM bandwidth a decode step achieves
COMPUTE_EFFICIENCY = 0.50  # share of dense tensor-core peak that prompt processing achieves (MFU)
STEP_OVERHEAD_S = 0.0003  # scheduler, sampling and kernel launches per engine step
CLIENT_OVERHEAD_MEDIAN_S = 0.070  # HTTP, chat template, tokenisation, first streamed chunk
CLIENT_OVERHEAD_SIGMA = 0.64  # lognormal shape of the above (the reference TTFT tail is mostly here)
WEIGHT_OVERHEAD = 1.06  # embeddings/lm_head kept in 16 bit, norms, scales: 8.03 B params FP8 -> 8.5 GB
MIN_CHUNK_TOKENS = 64


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """The vLLM flags that shape capacity and latency."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    max_model_len: int = 4096
    gpu_memory_utilization: float = 0.90
    quantization: str = "fp8"  # "fp8" or "bf16"
    kv_cache_dtype: str = "fp8"  # "fp8" or "auto" (= the compute dtype, 2 bytes)


class ModelDoesNotFit(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """Everything the fleet model asks of one (GPU, model, flags) combination. Pure numbers."""

    gpu: str
    model: str
    weights_bytes: float
    kv_bytes_per_token: float
    kv_capacity_tokens: int
    bandwidth_bytes_s: float  # effective
    prefill_s_per_token: float  # effective compute time of one prompt token
    step_overhead_s: float
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    overhead_median_s: float = CLIENT_OVERHEAD_MEDIAN_S
    overhead_sigma: float = CLIENT_OVERHEAD_SIGMA

    @property
    def slots_at_max_len(self) -> int:
        """The brief's "concurrent session slots": KV capacity / max-model-len (vLLM's own log line)."""
        return self.kv_capacity_tokens // self.max_model_len

    def memory_s(self, kv_tokens: FloatArray) -> FloatArray:
        """Time to stream the weights and the batch's KV cache through the GPU once."""
        return (self.weights_bytes + kv_tokens * self.kv_bytes_per_token) / self.bandwidth_bytes_s

    def decode_step_s(self, batch: FloatArray, kv_tokens: FloatArray) -> FloatArray:
        """Seconds per pure-decode engine step for ``batch`` sequences holding ``kv_tokens`` (roofline)."""
        return self.step_overhead_s + np.maximum(self.memory_s(kv_tokens), batch * self.prefill_s_per_token)

    def free_compute_s(self, batch: FloatArray, kv_tokens: FloatArray) -> FloatArray:
        """Compute time a decode step leaves idle while it waits on memory: prompt tokens fill it for free."""
        return np.maximum(self.memory_s(kv_tokens) - batch * self.prefill_s_per_token, 0.0)

    def chunk_tokens(self, batch: FloatArray) -> FloatArray:
        """Prompt tokens one step can take beside ``batch`` decodes (chunked-prefill budget)."""
        return np.maximum(self.max_num_batched_tokens - batch, MIN_CHUNK_TOKENS)

    def prefill_extra_s(self, prompt_tokens: FloatArray, free_s: FloatArray, chunk: FloatArray) -> FloatArray:
        """How much longer the steps carrying a prompt last than pure decode steps would."""
        steps = np.maximum(prompt_tokens / chunk, 1.0)
        return np.maximum(prompt_tokens * self.prefill_s_per_token - free_s * steps, 0.0)

    def decode_tokens_per_s(self, step_s: FloatArray, extra_share: FloatArray) -> FloatArray:
        """Tokens per second per running sequence when prompts stretch ``extra_share`` of the time.

        Every engine step gives each running sequence one token; prompt work lengthens some steps.
        """
        return (1.0 - extra_share) / step_s


def weight_bytes(arch: ModelArch, quantization: str) -> float:
    per_param = 1.0 if quantization == "fp8" else 2.0
    return arch.params_b * GB * per_param * WEIGHT_OVERHEAD


def build_profile(gpu: str, model: str, config: EngineConfig | None = None) -> EngineProfile:
    """Derive the profile of ``model`` served by vLLM on one ``gpu`` (a ``sizing.gpus`` name or alias)."""
    cfg = config or EngineConfig()
    info: GpuInfo = gpu_info(gpu)
    arch = model_arch(model)
    bf16_tflops, fp8_tflops = GPU_TFLOPS[info.name]
    fp8_compute = cfg.quantization == "fp8" and info.fp8 and fp8_tflops is not None
    # FP8 weights on Ampere run weight-only (Marlin): 1-byte weights, 16-bit math; FP8 KV needs Hopper+.
    kv_element_bytes = 1.0 if (cfg.kv_cache_dtype == "fp8" and info.fp8) else 2.0
    kv_per_token = arch.layers * 2 * arch.kv_heads * arch.head_dim * kv_element_bytes
    weights = weight_bytes(arch, cfg.quantization)
    free = info.memory_gb * GB * cfg.gpu_memory_utilization - weights
    if free <= kv_per_token * cfg.max_model_len:
        raise ModelDoesNotFit(
            f"{arch.name} ({weights / GB:.1f} GB of weights) leaves no room for one {cfg.max_model_len}-token "
            f"sequence of KV cache on {info.name} at gpu_memory_utilization {cfg.gpu_memory_utilization}; "
            "use a bigger GPU, FP8 weights or a shorter max_model_len"
        )
    peak = (fp8_tflops if fp8_compute and fp8_tflops is not None else bf16_tflops) * 1e12
    return EngineProfile(
        gpu=info.name,
        model=arch.name,
        weights_bytes=weights,
        kv_bytes_per_token=kv_per_token,
        kv_capacity_tokens=int(free // kv_per_token),
        bandwidth_bytes_s=info.bandwidth_gbps * GB * BANDWIDTH_EFFICIENCY,
        prefill_s_per_token=2.0 * arch.params_b * 1e9 / (peak * COMPUTE_EFFICIENCY),
        step_overhead_s=STEP_OVERHEAD_S,
        max_num_seqs=cfg.max_num_seqs,
        max_num_batched_tokens=cfg.max_num_batched_tokens,
        max_model_len=cfg.max_model_len,
        overhead_median_s=CLIENT_OVERHEAD_MEDIAN_S,
        overhead_sigma=CLIENT_OVERHEAD_SIGMA,
    )
