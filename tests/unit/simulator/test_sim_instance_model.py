from __future__ import annotations

import numpy as np
import pytest

from simulator.instance_model import EngineConfig, ModelDoesNotFit, build_profile


def test_kv_bytes_per_token_matches_the_brief_for_llama_8b_fp8() -> None:
    profile = build_profile("H100-SXM5-80GB", "meta-llama/Llama-3.1-8B-Instruct")
    assert profile.kv_bytes_per_token == 32 * 2 * 8 * 128 * 1 == 65_536
    # (80 GB × 0.90 − ~8.5 GB weights) / 64 KiB per token / 4096 tokens: the brief's "~248 slots".
    assert 230 <= profile.slots_at_max_len <= 250
    assert profile.weights_bytes == pytest.approx(8.5e9, rel=0.01)


def test_kv_cache_is_two_bytes_without_hardware_fp8() -> None:
    hopper = build_profile("H100-SXM5-80GB", "llama-3.1-8b")
    ampere = build_profile("A100-80GB-PCIe", "llama-3.1-8b")
    assert ampere.kv_bytes_per_token == 2 * hopper.kv_bytes_per_token
    assert ampere.kv_capacity_tokens < hopper.kv_capacity_tokens


def test_70b_fp8_does_not_fit_one_h100_but_fits_an_h200() -> None:
    with pytest.raises(ModelDoesNotFit, match="H100"):
        build_profile("H100-SXM5-80GB", "llama-3.1-70b")
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
