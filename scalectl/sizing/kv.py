"""KV-cache and weight memory math: bytes per token, weights size, and how many sequences fit.

    KV bytes per token = layers × 2 (K and V) × kv_heads × head_dim × bytes per element
    slots = (GPU memory × gpu-memory-utilization − weights − runtime overhead) / (KV bytes per max-model-len sequence)

Units are bytes throughout and GiB (2**30) at the edges. GPU memory is binary ("80 GB" HBM is 80 GiB), and
vLLM reports weights in GiB ("Loading weights took 8.49 GiB" for Llama 3.1 8B FP8), so both sides of the
subtraction use the same unit. ``runtime_overhead_gib`` is what vLLM's profile run takes on top of the
weights before sizing the KV cache: peak activations for a max-num-batched-tokens step, CUDA graphs and
non-torch allocations (1–3 GiB for 7–8B models at the default 2,048 batched tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from scalectl.sizing.errors import ContextTooLong, Fp8Unsupported, SizingError, WeightsDoNotFit
from scalectl.sizing.gpus import GIB, GpuInfo, fp8_gpus, supports_fp8
from scalectl.sizing.models import ModelInfo

WeightsDtype = Literal["fp8", "bf16", "fp16", "native"]
KvDtype = Literal["fp8", "auto"]  # "auto": the model's compute dtype (BF16, 2 bytes), as in vLLM

WEIGHT_BYTES = {"fp8": 1, "bf16": 2, "fp16": 2}
KV_BYTES = {"fp8": 1, "auto": 2}
DEFAULT_RUNTIME_OVERHEAD_GIB = 1.5
BLOCK_TOKENS = 16  # vLLM's KV block size; context lengths are reported in whole blocks
TP_SIZES = (1, 2, 4, 8)


def kv_bytes_per_token(model: ModelInfo, kv_dtype: KvDtype) -> int:
    """Bytes each extra token of context adds to one sequence (full-attention layers only)."""
    return model.full_attention_layers * 2 * model.num_kv_heads * model.head_dim * KV_BYTES[kv_dtype]


def kv_bytes_per_sequence(model: ModelInfo, kv_dtype: KvDtype, context: int) -> int:
    """KV bytes one sequence of ``context`` tokens holds; sliding-window layers keep at most the window."""
    full = kv_bytes_per_token(model, kv_dtype) * context
    if not model.sliding_layers or not model.sliding_window:
        return full
    per_layer_token = 2 * model.num_kv_heads * model.head_dim * KV_BYTES[kv_dtype]
    return full + model.sliding_layers * per_layer_token * min(model.sliding_window, context)


def weights_bytes(model: ModelInfo, weights: WeightsDtype) -> int:
    """Weights as loaded. FP8 (vLLM's dynamic W8A8) quantizes the linear layers; embeddings and LM head stay BF16."""
    if weights == "native":
        if model.native_weights_bytes is None:
            raise SizingError(f"{model.name} ships no pre-quantized weights; choose fp8, bf16 or fp16 weights")
        return model.native_weights_bytes
    if model.native_quantization:
        raise SizingError(
            f"{model.name} ships {model.native_quantization} weights that vLLM serves as they are; "
            f"use --weights native (or leave it unset)"
        )
    if weights == "fp8":
        return (model.parameters - model.embedding_parameters) + model.embedding_parameters * 2
    return model.parameters * WEIGHT_BYTES[weights]


def check_fp8(gpu: GpuInfo, weights: WeightsDtype, kv_dtype: KvDtype) -> None:
    asked = [what for what, on in (("FP8 weights", weights == "fp8"), ("FP8 KV cache", kv_dtype == "fp8")) if on]
    if asked and not supports_fp8(gpu):
        raise Fp8Unsupported(
            f"{' and '.join(asked)} need compute capability 8.9 or newer (Ada, Hopper, Blackwell); "
            f"{gpu.name} is {gpu.compute_capability_str} ({gpu.architecture}). Use bf16/fp16 weights and "
            f"--kv-cache auto on {gpu.name}, or an FP8 GPU: {', '.join(fp8_gpus())}"
        )


@dataclass(frozen=True, slots=True)
class SlotMath:
    """One server (``tensor_parallel`` GPUs sharing the weights and the KV cache) and what fits on it."""

    model: str
    gpu: str
    tensor_parallel: int
    weights_dtype: WeightsDtype
    kv_dtype: KvDtype
    max_model_len: int
    gpu_memory_utilization: float
    gpu_memory_bytes: int  # all GPUs of the server
    usable_bytes: int  # × gpu-memory-utilization
    weights_bytes: int
    overhead_bytes: int
    kv_budget_bytes: int
    kv_bytes_per_token: int
    kv_bytes_per_sequence: int
    slots: int  # sequences of max_model_len tokens that fit at once

    @property
    def kv_budget_gib(self) -> float:
        return self.kv_budget_bytes / GIB

    @property
    def weights_gib(self) -> float:
        return self.weights_bytes / GIB


def _usable(gpu: GpuInfo, tp: int, util: float) -> int:
    return int(gpu.memory_bytes * tp * util)


def smallest_tensor_parallel(
    model: ModelInfo, gpu: GpuInfo, weights: int, util: float, overhead_gib: float, limit: int = 8
) -> int | None:
    """The fewest GPUs (1, 2, 4, 8, dividing the attention heads) whose memory holds the weights with room for KV."""
    for tp in TP_SIZES:
        if tp > limit:
            break
        if model.num_attention_heads % tp:
            continue
        if _usable(gpu, tp, util) - weights - int(overhead_gib * GIB * tp) > 0:
            return tp
    return None


def largest_context(budget: int, model: ModelInfo, kv_dtype: KvDtype) -> int:
    """Largest max-model-len (whole KV blocks, at most the model's maximum) for which one sequence fits."""
    if budget <= 0:
        return 0
    lo, hi = 0, model.max_context // BLOCK_TOKENS
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if kv_bytes_per_sequence(model, kv_dtype, mid * BLOCK_TOKENS) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo * BLOCK_TOKENS


def slot_math(
    model: ModelInfo,
    gpu: GpuInfo,
    *,
    weights: WeightsDtype,
    kv_dtype: KvDtype,
    max_model_len: int,
    gpu_memory_utilization: float = 0.90,
    tensor_parallel: int = 1,
    runtime_overhead_gib: float = DEFAULT_RUNTIME_OVERHEAD_GIB,
    weights_override_bytes: int | None = None,
) -> SlotMath:
    """KV slots on one server. Raises a SizingError naming what would fit when nothing does."""
    if not 0 < gpu_memory_utilization <= 1:
        raise SizingError(f"gpu-memory-utilization must be in (0, 1], got {gpu_memory_utilization}")
    if max_model_len <= 0:
        raise SizingError(f"max-model-len must be positive, got {max_model_len}")
    check_fp8(gpu, weights, kv_dtype)
    if model.max_context and max_model_len > model.max_context:
        raise ContextTooLong(
            f"max-model-len {max_model_len:,} is above what {model.name} supports ({model.max_context:,}); "
            f"use at most {model.max_context:,}",
            model.max_context,
        )
    w = weights_override_bytes if weights_override_bytes is not None else weights_bytes(model, weights)
    usable = _usable(gpu, tensor_parallel, gpu_memory_utilization)
    overhead = int(runtime_overhead_gib * GIB * tensor_parallel)
    budget = usable - w - overhead
    if budget <= 0:
        tp = smallest_tensor_parallel(model, gpu, w, gpu_memory_utilization, runtime_overhead_gib)
        hint = f"use {tp}× {gpu.name} with tensor parallelism (gpu_count: {tp})" if tp else "use a larger GPU"
        cheaper = " or fp8 weights" if weights in ("bf16", "fp16") and supports_fp8(gpu) else ""
        raise WeightsDoNotFit(
            f"{model.name} weights ({w / GIB:.1f} GiB as {weights}) do not fit in {tensor_parallel}× {gpu.name} "
            f"at gpu-memory-utilization {gpu_memory_utilization} ({usable / GIB:.1f} GiB usable, "
            f"{overhead / GIB:.1f} GiB runtime overhead); {hint}{cheaper}"
        )
    per_seq = kv_bytes_per_sequence(model, kv_dtype, max_model_len)
    slots = budget // per_seq
    if slots < 1:
        fit = largest_context(budget, model, kv_dtype)
        more = ", or add GPUs" + (" / use FP8 KV" if kv_dtype != "fp8" and supports_fp8(gpu) else "")
        raise ContextTooLong(
            f"max-model-len {max_model_len:,} does not fit: one sequence needs {per_seq / GIB:.2f} GiB of KV cache "
            f"({model.name}, {kv_dtype} KV) but {tensor_parallel}× {gpu.name} leaves {budget / GIB:.2f} GiB after "
            f"weights; the largest that fits is {fit:,} tokens (one sequence at a time){more}",
            fit,
        )
    return SlotMath(
        model=model.name,
        gpu=gpu.name,
        tensor_parallel=tensor_parallel,
        weights_dtype=weights,
        kv_dtype=kv_dtype,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        gpu_memory_bytes=gpu.memory_bytes * tensor_parallel,
        usable_bytes=usable,
        weights_bytes=w,
        overhead_bytes=overhead,
        kv_budget_bytes=budget,
        kv_bytes_per_token=kv_bytes_per_token(model, kv_dtype),
        kv_bytes_per_sequence=per_seq,
        slots=int(slots),
    )


def kv_bytes_for_sessions(model: ModelInfo, kv_dtype: KvDtype, context: int, sessions: int) -> int:
    return kv_bytes_per_sequence(model, kv_dtype, context) * sessions
