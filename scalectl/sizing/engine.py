"""vLLM on one server: KV-cache capacity, engine step times and the rates a batch runs at.

The one latency model of the project: the simulator's fleet model, the vLLM stand-in and the embedded demo
load all take their step times from an ``EngineProfile`` built here, and its KV capacity comes from the
same ``scalectl.sizing.kv`` math ``scalectl plan`` and ``tune_vllm_args`` use.

The physics, per engine step (continuous batching, chunked prefill, vLLM V1 scheduler):

* a decode step reads the weights and the batch's KV cache once: ``t_mem = (streamed weights + kv_tokens ×
  kv_bytes) / bandwidth``; its compute is ``batch × 2 × active params`` FLOPs; the step takes ``overhead +
  max(t_mem, compute)``. The input embedding is a lookup, not streamed; every other weight is;
* prompt tokens ride in the same steps, at most ``max_num_batched_tokens − batch`` per step (the chunk), each
  costing ``2 × active params`` FLOPs on top — prefill is compute-bound, decode is bandwidth-bound;
* requests are admitted while fewer than ``max_num_seqs`` run and their KV cache fits; others wait (FCFS).

Only three efficiencies are fitted (bandwidth, compute and a fixed per-step overhead), once, against the
reference case study; every GPU and model reuses them with its own spec-sheet figures. Tensor parallelism
multiplies bandwidth and compute by the GPU count (all-reduce time is not modelled). Client-side latency
that the engine never sees (HTTP, chat template, tokenisation, streaming) is a lognormal added to each request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from scalectl.sizing.gpus import GpuInfo, gpu_info, supports_fp8
from scalectl.sizing.kv import DEFAULT_RUNTIME_OVERHEAD_GIB, KvDtype, WeightsDtype, slot_math, weights_bytes
from scalectl.sizing.models import ModelInfo, lookup_model, resolve_model
from scalectl.sizing.spec import ServingSpec
from scalectl.sizing.vllm_args import TunedArgs, tune_vllm_args

# Fitted once on "1× H100 SXM5, Llama 3.1 8B FP8, 100 closed-loop sessions" (tests/unit/simulator/
# test_sim_calibration.py); see docs/simulator.md for the fit and what it does not capture.
BANDWIDTH_EFFICIENCY = 0.92  # share of spec HBM bandwidth a decode step achieves
COMPUTE_EFFICIENCY = 0.50  # share of dense tensor-core peak that prompt processing achieves (MFU)
STEP_OVERHEAD_S = 0.0003  # scheduler, sampling and kernel launches per engine step
CLIENT_OVERHEAD_MEDIAN_S = 0.070  # HTTP, chat template, tokenisation, first streamed chunk
CLIENT_OVERHEAD_SIGMA = 0.64  # lognormal shape of the above (the reference TTFT tail is mostly here)
MIN_CHUNK_TOKENS = 64
GB = 1e9  # bandwidth and TFLOPS are decimal spec-sheet units

X = TypeVar("X", float, np.ndarray)


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """The vLLM flags that shape capacity and latency (``vllm serve`` spellings in the comments)."""

    max_num_seqs: int = 256  # --max-num-seqs
    max_num_batched_tokens: int = 2048  # --max-num-batched-tokens
    max_model_len: int = 4096  # --max-model-len
    gpu_memory_utilization: float = 0.90  # --gpu-memory-utilization
    weights_dtype: WeightsDtype = "fp8"  # --quantization fp8, or --dtype bfloat16/float16, or the checkpoint's
    kv_cache_dtype: KvDtype = "fp8"  # --kv-cache-dtype
    tensor_parallel: int = 1  # --tensor-parallel-size
    runtime_overhead_gib: float = DEFAULT_RUNTIME_OVERHEAD_GIB  # per GPU, what vLLM's profile run takes

    @classmethod
    def from_tuned(cls, tuned: TunedArgs) -> EngineConfig:
        """The engine the daemon launches: the tuned flags, with the tier's ``extra_args`` overriding them."""
        args = _last_values(tuned.args)
        math_ = tuned.slots

        def number(flag: str, fallback: float) -> float:
            value = args.get(flag)
            return float(value) if value is not None else fallback

        weights: WeightsDtype = math_.weights_dtype
        if args.get("--quantization") == "fp8":
            weights = "fp8"
        elif "--quantization" not in args and args.get("--dtype") in ("bfloat16", "float16"):
            weights = "bf16" if args["--dtype"] == "bfloat16" else "fp16"
        kv_flag = args.get("--kv-cache-dtype")
        kv: KvDtype = math_.kv_dtype if kv_flag is None else ("fp8" if kv_flag.startswith("fp8") else "auto")
        tp = int(number("--tensor-parallel-size", math_.tensor_parallel))
        return cls(
            max_num_seqs=int(number("--max-num-seqs", 256)),
            max_num_batched_tokens=int(number("--max-num-batched-tokens", 2048)),
            max_model_len=int(number("--max-model-len", math_.max_model_len)),
            gpu_memory_utilization=number("--gpu-memory-utilization", math_.gpu_memory_utilization),
            weights_dtype=weights,
            kv_cache_dtype=kv,
            tensor_parallel=tp,
            runtime_overhead_gib=math_.overhead_bytes / math_.tensor_parallel / 2**30,
        )


def _last_values(args: tuple[str, ...]) -> dict[str, str]:
    """``--flag value`` and ``--flag=value`` pairs; a later one wins, as in vLLM's argument parser."""
    out: dict[str, str] = {}
    for i, token in enumerate(args):
        if not token.startswith("--"):
            continue
        if "=" in token:
            name, value = token.split("=", 1)
            out[name] = value
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[token] = args[i + 1]
        else:
            out[token] = ""
    return out


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """Everything a load model asks of one (GPU, model, flags) combination. Pure numbers.

    Methods take floats or numpy arrays (the simulator advances every instance of a tier at once)."""

    gpu: str
    model: str
    weights_bytes: float  # as loaded (what ``scalectl plan`` reports)
    streamed_bytes: float  # read by every decode step: the weights minus the input-embedding lookup
    kv_bytes_per_token: float
    kv_capacity_tokens: int
    bandwidth_bytes_s: float  # effective, all GPUs of the server
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

    def memory_s(self, kv_tokens: X) -> X:
        """Time to stream the weights and the batch's KV cache through the GPU once."""
        return (self.streamed_bytes + kv_tokens * self.kv_bytes_per_token) / self.bandwidth_bytes_s

    def decode_step_s(self, batch: X, kv_tokens: X) -> X:
        """Seconds per pure-decode engine step for ``batch`` sequences holding ``kv_tokens`` (roofline)."""
        return self.step_overhead_s + np.maximum(self.memory_s(kv_tokens), batch * self.prefill_s_per_token)  # type: ignore[no-any-return]

    def free_compute_s(self, batch: X, kv_tokens: X) -> X:
        """Compute time a decode step leaves idle while it waits on memory: prompt tokens fill it for free."""
        return np.maximum(self.memory_s(kv_tokens) - batch * self.prefill_s_per_token, 0.0)  # type: ignore[no-any-return]

    def chunk_tokens(self, batch: X) -> X:
        """Prompt tokens one step can take beside ``batch`` decodes (chunked-prefill budget)."""
        return np.maximum(self.max_num_batched_tokens - batch, MIN_CHUNK_TOKENS)  # type: ignore[no-any-return]

    def prefill_extra_s(self, prompt_tokens: X, free_s: X, chunk: X) -> X:
        """How much longer the steps carrying a prompt last than pure decode steps would."""
        steps = np.maximum(prompt_tokens / chunk, 1.0)
        return np.maximum(prompt_tokens * self.prefill_s_per_token - free_s * steps, 0.0)  # type: ignore[no-any-return]

    def decode_tokens_per_s(self, step_s: X, extra_share: X) -> X:
        """Tokens per second per running sequence when prompts stretch ``extra_share`` of the time.

        Every engine step gives each running sequence one token; prompt work lengthens some steps.
        """
        return (1.0 - extra_share) / step_s

    def step_s(self, batch: float, kv_tokens: float, prompt_tokens: float) -> float:
        """One engine step that decodes ``batch`` sequences and prefills ``prompt_tokens`` beside them."""
        decode = self.decode_step_s(batch, kv_tokens)
        free = self.free_compute_s(batch, kv_tokens)
        return float(decode + max(prompt_tokens * self.prefill_s_per_token - free, 0.0))


def _input_embedding_bytes(model: ModelInfo, weights: WeightsDtype) -> int:
    """The input embedding as loaded (16-bit, also under FP8): a lookup, which a decode step does not stream.
    Tied embeddings are the LM head too, which is streamed; pre-quantized checkpoints are counted whole."""
    if weights == "native" or model.tie_word_embeddings:
        return 0
    return model.vocab_size * model.hidden_size * 2


def build_profile(gpu: str | GpuInfo, model: str | ModelInfo, config: EngineConfig | None = None) -> EngineProfile:
    """The profile of ``model`` served by vLLM on ``config.tensor_parallel``× ``gpu``.

    Raises a ``SizingError`` (the same sentence ``scalectl plan`` prints) when the model does not fit."""
    cfg = config or EngineConfig()
    info = gpu if isinstance(gpu, GpuInfo) else gpu_info(gpu)
    arch = model if isinstance(model, ModelInfo) else lookup_model(model)
    tp = cfg.tensor_parallel
    math_ = slot_math(
        arch,
        info,
        weights=cfg.weights_dtype,
        kv_dtype=cfg.kv_cache_dtype,
        max_model_len=cfg.max_model_len,
        gpu_memory_utilization=cfg.gpu_memory_utilization,
        tensor_parallel=tp,
        runtime_overhead_gib=cfg.runtime_overhead_gib,
    )
    loaded = weights_bytes(arch, cfg.weights_dtype)
    fp8_compute = cfg.weights_dtype == "fp8" and supports_fp8(info) and info.fp8_tflops is not None
    peak = (info.fp8_tflops if fp8_compute and info.fp8_tflops is not None else info.bf16_tflops) * 1e12 * tp
    active = arch.active_parameters or arch.parameters
    return EngineProfile(
        gpu=info.name,
        model=arch.name,
        weights_bytes=float(loaded),
        streamed_bytes=float(loaded - _input_embedding_bytes(arch, cfg.weights_dtype)),
        kv_bytes_per_token=float(math_.kv_bytes_per_token),
        kv_capacity_tokens=int(math_.kv_budget_bytes // math_.kv_bytes_per_token),
        bandwidth_bytes_s=info.bandwidth_gbps * GB * BANDWIDTH_EFFICIENCY * tp,
        prefill_s_per_token=2.0 * active / (peak * COMPUTE_EFFICIENCY),
        step_overhead_s=STEP_OVERHEAD_S,
        max_num_seqs=cfg.max_num_seqs,
        max_num_batched_tokens=cfg.max_num_batched_tokens,
        max_model_len=cfg.max_model_len,
    )


def launched_engine(serving: ServingSpec, gpu: str, gpu_count: int = 1) -> EngineProfile:
    """The engine the daemon launches for a tier: ``tune_vllm_args`` (dtypes, KV dtype, max-num-seqs capped
    at the KV slots, memory utilisation, batched tokens, max-model-len, tensor parallelism, ``extra_args``)."""
    tuned = tune_vllm_args(serving, gpu, gpu_count)
    return build_profile(gpu, resolve_model(serving.model, serving.config_json), EngineConfig.from_tuned(tuned))
