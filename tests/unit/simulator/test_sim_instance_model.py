from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from scalectl.simulator.fleet import engine_for
from scalectl.sizing.engine import EngineConfig, build_profile
from scalectl.sizing.errors import Fp8Unsupported, WeightsDoNotFit
from scalectl.sizing.gpus import GIB
from scalectl.sizing.spec import ServingSpec
from scalectl.sizing.vllm_args import tune_vllm_args


def test_kv_bytes_per_token_matches_the_brief_for_llama_8b_fp8() -> None:
    profile = build_profile("H100-SXM5-80GB", "meta-llama/Llama-3.1-8B-Instruct")
    assert profile.kv_bytes_per_token == 32 * 2 * 8 * 128 * 1 == 65_536
    # (80 GiB × 0.90 − 8.5 GiB weights − 1.5 GiB runtime) / 64 KiB per token / 4096 tokens: the brief's "~248 slots".
    assert 230 <= profile.slots_at_max_len <= 250
    # vLLM's log for Llama 3.1 8B FP8: "Loading weights took 8.49 GiB" (embeddings and LM head stay BF16).
    assert profile.weights_bytes == pytest.approx(8.49 * GIB, rel=0.01)
    # A decode step streams everything but the input embedding, which is a lookup.
    assert profile.streamed_bytes == pytest.approx(profile.weights_bytes - 128256 * 4096 * 2)


@dataclass(frozen=True)
class _Tier:
    gpu: str
    gpu_count: int = 1
    capacity: str = "on-demand"
    serving: ServingSpec = field(default_factory=ServingSpec)


def test_kv_cache_is_two_bytes_without_hardware_fp8() -> None:
    hopper = engine_for(_Tier("H100-SXM5-80GB"))
    ampere = engine_for(_Tier("A100-80GB-PCIe"))
    assert ampere.kv_bytes_per_token == 2 * hopper.kv_bytes_per_token
    assert ampere.kv_capacity_tokens < hopper.kv_capacity_tokens
    assert ampere.weights_bytes == 2 * 8_030_261_248  # BF16 weights: FP8 needs compute capability 8.9+
    with pytest.raises(Fp8Unsupported, match="A100"):
        build_profile("A100-80GB-PCIe", "llama-3.1-8b")  # FP8 asked for explicitly: refused with the fix


def test_the_simulated_engine_is_the_one_tune_vllm_args_launches() -> None:
    serving = ServingSpec(target_concurrency=100)
    tuned = tune_vllm_args(serving, "L40S-48GB")
    engine = engine_for(_Tier("L40S-48GB", serving=serving))
    flags = dict(zip(tuned.args[::2], tuned.args[1::2], strict=False))
    # 2 × 100 = 200 sequences, though an L40S holds only 132 of the full 4,096 tokens: vLLM admits by blocks held.
    assert engine.max_num_seqs == int(flags["--max-num-seqs"]) == 200 > tuned.slots.slots == 132
    assert engine.max_model_len == int(flags["--max-model-len"]) == 4096
    assert engine.kv_capacity_tokens == tuned.slots.kv_budget_bytes // tuned.slots.kv_bytes_per_token
    assert engine.max_num_batched_tokens == 2048


def test_extra_args_override_the_tuned_flags_in_the_simulated_engine_too() -> None:
    serving = ServingSpec(
        max_model_len=8192,
        gpu_memory_utilization=0.8,
        extra_args=("--max-num-seqs=64", "--max-num-batched-tokens", "4096"),
    )
    engine = engine_for(_Tier("H100-SXM5-80GB", serving=serving))
    default = engine_for(_Tier("H100-SXM5-80GB"))
    assert (engine.max_num_seqs, engine.max_num_batched_tokens, engine.max_model_len) == (64, 4096, 8192)
    assert engine.kv_capacity_tokens < default.kv_capacity_tokens  # 0.8 of the memory instead of 0.9


def test_70b_does_not_fit_one_h100_in_bf16_leaves_it_a_handful_of_fp8_slots_and_fits_an_h200() -> None:
    with pytest.raises(WeightsDoNotFit, match=r"H100-SXM5-80GB.*tensor parallelism"):
        build_profile("H100-SXM5-80GB", "llama-3.1-70b", EngineConfig(weights_dtype="bf16", kv_cache_dtype="auto"))
    assert build_profile("H100-SXM5-80GB", "llama-3.1-70b").slots_at_max_len < 10
    two = build_profile("H100-SXM5-80GB", "llama-3.1-70b", EngineConfig(weights_dtype="bf16", tensor_parallel=2))
    assert two.slots_at_max_len > 10
    h200 = build_profile("H200-141GB", "llama-3.1-70b")
    assert h200.kv_bytes_per_token == 80 * 2 * 8 * 128
    assert h200.kv_capacity_tokens > 100_000


def test_decode_step_grows_with_kv_and_faster_memory_gives_faster_steps() -> None:
    h100 = build_profile("H100-SXM5-80GB", "llama-3.1-8b")
    h200 = build_profile("H200-141GB", "llama-3.1-8b")
    batch = np.array([1.0, 100.0, 200.0])
    kv = batch * 800
    steps = h100.decode_step_s(batch, kv)
    assert np.all(np.diff(steps) > 0)
    assert np.all(h200.decode_step_s(batch, kv) < steps)
    # Weights alone: 8.5 GB at ~3.1 TB/s effective is a few milliseconds per step.
    assert 0.002 < steps[0] < 0.004


def test_prompt_tokens_that_fit_under_the_memory_time_are_free() -> None:
    p = build_profile("H100-SXM5-80GB", "llama-3.1-8b", EngineConfig(max_num_seqs=200))
    batch, kv = np.array([50.0]), np.array([40_000.0])
    free = p.free_compute_s(batch, kv)
    chunk = p.chunk_tokens(batch)
    assert float(free[0]) > 0
    small = p.prefill_extra_s(np.array([10.0]), free, chunk)
    large = p.prefill_extra_s(np.array([2000.0]), free, chunk)
    assert float(small[0]) == 0.0
    assert float(large[0]) > 0.01
    assert float(chunk[0]) == 2048 - 50
