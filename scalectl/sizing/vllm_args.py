"""Tuned ``vllm serve`` arguments for a tier, each with the reason it was chosen.

Rules (docs/sizing.md): max-model-len at the tier's context target, not the model maximum; max-num-seqs
at 2× target concurrency, never ``KV slots ÷ max-model-len`` (vLLM's paged KV cache admits sequences by
the blocks they hold and preempts when it runs out, so the worst case is a warning, not a cap); FP8
weights and KV cache only where the GPU runs them;
chunked prefill at 2,048 batched tokens; tensor parallelism only when the weights need it; a shutdown
timeout so SIGTERM drains in-flight requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scalectl.sizing.errors import SizingError
from scalectl.sizing.gpus import GpuInfo, gpu_info
from scalectl.sizing.kv import SlotMath, slot_math
from scalectl.sizing.models import ModelInfo, resolve_model
from scalectl.sizing.plan import choose_dtypes
from scalectl.sizing.spec import ServingSpec

DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
SEQS_PER_TARGET = 2.0  # 1.5–2× target concurrency absorbs bursts without queueing (case study: 130-request spike)


@dataclass(frozen=True, slots=True)
class Flag:
    name: str  # "--max-num-seqs"
    value: str | None  # None for switches
    reason: str

    def tokens(self) -> list[str]:
        return [self.name] if self.value is None else [self.name, self.value]


@dataclass(frozen=True, slots=True)
class TunedArgs:
    model: str
    flags: tuple[Flag, ...]
    extra_args: tuple[str, ...]
    slots: SlotMath
    notes: tuple[str, ...] = ()  # reasons that are not tied to one flag (warnings, overrides)

    @property
    def args(self) -> tuple[str, ...]:
        """Everything after the model: ``vllm serve MODEL *args``."""
        out: list[str] = []
        for f in self.flags:
            out += f.tokens()
        return (*out, *self.extra_args)

    def command(self) -> list[str]:
        return ["vllm", "serve", self.model, *self.args]

    def reasons(self) -> list[str]:
        return [f"{f.name}: {f.reason}" for f in self.flags] + list(self.notes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "command": self.command(),
            "args": list(self.args),
            "reasons": self.reasons(),
            "kv_slots": self.slots.slots,
            "kv_bytes_per_token": self.slots.kv_bytes_per_token,
        }


def max_num_seqs(target_concurrency: int) -> int:
    """``--max-num-seqs``: twice the target concurrency. Never capped at ``KV slots ÷ max-model-len``: vLLM
    allocates KV blocks (16 tokens) as a sequence grows and admits by the blocks free, so the cap binds only
    when sequences really hold that much; the KV notes (``kv_fit_notes``) say when they would."""
    return math.ceil(target_concurrency * SEQS_PER_TARGET)


def kv_fit_notes(math_: SlotMath, seqs: int, typical: int | None) -> list[str]:
    """What the KV cache holds against ``seqs`` running sequences, for the reasons and the notes.

    ``typical``: the tier's p95 context (``context_target``), when it declares one. A warning when
    ``seqs`` sequences of that length do not fit (vLLM then preempts the newest and recomputes it later);
    without one, a note of the average length ``seqs`` sequences may hold. (One sequence at max-model-len
    that does not fit at all is an error from ``slot_math``: vLLM refuses to start.)"""
    tokens = math_.kv_budget_bytes // math_.kv_bytes_per_token
    per_seq = tokens // max(seqs, 1)
    holds = f"the KV cache holds {tokens:,} tokens ({math_.slots} sequences at the full max-model-len"
    if typical is None:
        if math_.slots >= seqs:
            return []
        return [
            f"note: {holds} {math_.max_model_len:,}); {seqs} running sequences fit while they average at most "
            f"{per_seq:,} tokens, beyond that vLLM preempts the newest (recompute); set serving.context_target "
            "(the p95 context) to have this checked"
        ]
    fit = tokens // max(typical, 1)
    if fit >= seqs:
        return []
    return [
        f"warning: {holds} {math_.max_model_len:,}), {fit} at the p95 context {typical:,}: fewer than "
        f"max-num-seqs {seqs}; at that length vLLM preempts the newest sequences (recompute) and TTFT climbs; "
        f"a server serves about {fit} such sessions (use FP8 KV cache, a larger GPU or more GPUs per server)"
    ]


def _flag_names(extra: tuple[str, ...]) -> set[str]:
    return {a.split("=", 1)[0] for a in extra if a.startswith("--")}


def _choose_tensor_parallel(
    model: ModelInfo, gpu: GpuInfo, gpu_count: int, target: int, common: dict[str, Any]
) -> SlotMath:
    """The fewest GPUs (of the machine's ``gpu_count``) whose KV slots cover the target concurrency;
    when none do, the split with the most slots. Tensor parallelism only pays when the weights need it."""
    fits: list[SlotMath] = []
    first_error: SizingError | None = None
    for tp in (n for n in (1, 2, 4, 8) if n <= gpu_count and model.num_attention_heads % n == 0):
        try:
            fits.append(slot_math(model, gpu, tensor_parallel=tp, **common))
        except SizingError as exc:
            first_error = first_error or exc
    if not fits:
        assert first_error is not None
        raise first_error
    for candidate in fits:
        if candidate.slots >= target:
            return candidate
    return max(fits, key=lambda s: s.slots)


def tune_vllm_args(
    serving: ServingSpec,
    gpu: str,
    gpu_count: int = 1,
    *,
    drain_timeout: float | None = None,
) -> TunedArgs:
    """Arguments for ``vllm serve`` on ``gpu_count``× ``gpu``. Raises SizingError when the tier cannot fit."""
    g = gpu_info(gpu)
    model = resolve_model(serving.model, serving.config_json)
    weights, kv, dtype_reasons = choose_dtypes(model, g, serving.weights_dtype, serving.kv_cache_dtype)
    max_len = serving.effective_max_model_len
    common: dict[str, Any] = {
        "weights": weights,
        "kv_dtype": kv,
        "max_model_len": max_len,
        "gpu_memory_utilization": serving.gpu_memory_utilization,
        "runtime_overhead_gib": serving.runtime_overhead_gib,
    }
    math_ = _choose_tensor_parallel(model, g, gpu_count, serving.target_concurrency, common)
    tp = math_.tensor_parallel
    served = serving.model if "/" in serving.model or serving.config_json else model.name
    notes: list[str] = []
    flags: list[Flag] = []

    flags.append(Flag("--host", "0.0.0.0", "listen on all interfaces; the load balancer reaches it over the network"))
    flags.append(Flag("--port", str(serving.port), "the serving port the readiness probe and nginx upstream use"))
    from_target = "max_model_len" not in serving.model_fields_set and serving.context_target is not None
    if from_target:
        len_reason = f"context target {serving.context_target:,} rounded up to whole 1,024 tokens"
    else:
        len_reason = f"as the tier declares (its context target), not the model maximum {model.max_context:,}"
    flags.append(
        Flag(
            "--max-model-len",
            str(max_len),
            f"{len_reason}; vLLM answers HTTP 400 to a request whose prompt + max_tokens exceed it",
        )
    )

    seqs = max_num_seqs(serving.target_concurrency)
    seq_reason = (
        f"{SEQS_PER_TARGET:g}× target concurrency {serving.target_concurrency} absorbs bursts; vLLM admits "
        f"sequences by the KV blocks they hold, not by max-model-len ({math_.slots} would fit at the full length)"
    )
    notes += kv_fit_notes(math_, seqs, serving.context_target)
    flags.append(Flag("--max-num-seqs", str(seqs), seq_reason))

    batched = serving.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
    batched_reason = (
        "as configured"
        if serving.max_num_batched_tokens
        else "chunked-prefill budget per step; 2,048 keeps long prefills from stalling decodes (good H100 default)"
    )
    if batched < seqs:
        batched_reason += f"; raised to max-num-seqs ({seqs}), which vLLM requires"
        batched = seqs
    flags.append(Flag("--max-num-batched-tokens", str(batched), batched_reason))

    flags.append(
        Flag(
            "--gpu-memory-utilization",
            f"{serving.gpu_memory_utilization:g}",
            f"share of GPU memory for weights + KV cache ({math_.kv_budget_gib:.1f} GiB KV after "
            f"{math_.weights_gib:.1f} GiB weights); the rest is headroom against OOM",
        )
    )
    if weights == "fp8":
        flags.append(Flag("--quantization", "fp8", dtype_reasons.pop(0) if dtype_reasons else "FP8 weights as asked"))
    elif weights in ("bf16", "fp16"):
        dtype = "bfloat16" if weights == "bf16" else "float16"
        why = dtype_reasons.pop(0) if serving.weights_dtype is None and dtype_reasons else f"{weights} weights as asked"
        flags.append(Flag("--dtype", dtype, why))
    elif dtype_reasons and serving.weights_dtype is None:
        notes.append(dtype_reasons.pop(0))
    if kv == "fp8":
        flags.append(Flag("--kv-cache-dtype", "fp8", dtype_reasons.pop(0) if dtype_reasons else "FP8 KV as asked"))
    elif dtype_reasons:
        notes.append(dtype_reasons.pop(0))
    if serving.enable_prefix_caching:
        flags.append(
            Flag(
                "--enable-prefix-caching",
                None,
                "agents share long system prompts; reusing their KV saves 20–40% of prefill",
            )
        )
    if tp > 1:
        flags.append(
            Flag(
                "--tensor-parallel-size",
                str(tp),
                f"{tp} GPUs share the weights ({math_.weights_gib:.1f} GiB) and the KV cache; fewer would not hold "
                f"the target concurrency {serving.target_concurrency} (or the weights)",
            )
        )
    if gpu_count > tp:
        notes.append(
            f"{gpu_count - tp} of the {gpu_count} GPUs per machine stay idle: one server needs {tp}; "
            f"lower gpu_count, or serve a model that needs them"
        )
    if serving.graceful_shutdown and drain_timeout:
        flags.append(
            Flag(
                "--shutdown-timeout",
                str(int(drain_timeout)),
                "SIGTERM waits this long for in-flight requests (the tier's drain_timeout)",
            )
        )

    overridden = _flag_names(serving.extra_args)
    kept = tuple(f for f in flags if f.name not in overridden)
    for f in flags:
        if f.name in overridden:
            notes.append(f"{f.name}: set by extra_args, tuned value {f.value or 'on'} dropped")
    return TunedArgs(model=served, flags=kept, extra_args=serving.extra_args, slots=math_, notes=tuple(notes))
