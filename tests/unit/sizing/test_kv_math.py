"""The reference KV figures (ARCHITECTURE.md §4, case study) and the units they depend on."""

from __future__ import annotations

import pytest

from scalectl.sizing.errors import ContextTooLong, Fp8Unsupported, WeightsDoNotFit
from scalectl.sizing.gpus import GIB, gpu_info
from scalectl.sizing.kv import kv_bytes_per_sequence, kv_bytes_per_token, slot_math, weights_bytes
from scalectl.sizing.models import lookup_model

LLAMA_8B = lookup_model("meta-llama/Llama-3.1-8B-Instruct")
H100 = gpu_info("H100-SXM5-80GB")
A100 = gpu_info("A100-80GB-PCIe")


def test_llama_8b_fp8_kv_is_65536_bytes_per_token() -> None:
    assert kv_bytes_per_token(LLAMA_8B, "fp8") == 32 * 2 * 8 * 128 * 1 == 65_536
    assert kv_bytes_per_token(LLAMA_8B, "auto") == 131_072


def test_a_4096_token_slot_is_256_mib() -> None:
    assert kv_bytes_per_sequence(LLAMA_8B, "fp8", 4096) == 256 * 1024**2


def test_fp8_weights_of_llama_8b_are_about_8_5_gib() -> None:
    # Linear layers in FP8, embeddings + LM head (2 × 128256 × 4096) kept in BF16, as vLLM loads them.
    w = weights_bytes(LLAMA_8B, "fp8")
    assert w == (8_030_261_248 - 2 * 128_256 * 4096) + 2 * 128_256 * 4096 * 2
    assert 8.4 < w / GIB < 8.5
    assert 14.9 < weights_bytes(LLAMA_8B, "bf16") / GIB < 15.0  # "~16 GB" in decimal units


def test_reference_248_slots_on_h100() -> None:
    """80 GiB × 0.90 = 72 GiB; − 8.46 GiB weights − 1.5 GiB runtime overhead = 62.0 GiB; / 0.25 GiB = 248."""
    m = slot_math(LLAMA_8B, H100, weights="fp8", kv_dtype="fp8", max_model_len=4096, gpu_memory_utilization=0.90)
    assert m.usable_bytes == 72 * GIB
    assert m.slots == 248


def test_units_behind_the_reference_figure() -> None:
    """The brief's arithmetic: 63.5 GB left / 256 MB per slot ≈ 248 uses 1,000 MB per GB; consistent units differ."""
    per_slot = 65_536 * 4096
    assert round(63.5 * 1000 / 256) == 248  # the reference's mixed-unit division
    assert int(63.5 * GIB // per_slot) == 254  # all binary (GiB), no runtime overhead
    assert int(63.5e9 // per_slot) == 236  # all decimal (GB)
    # Our model: binary units and vLLM's activation/CUDA-graph reservation; zero overhead gives the 254.
    no_overhead = slot_math(
        LLAMA_8B,
        H100,
        weights="fp8",
        kv_dtype="fp8",
        max_model_len=4096,
        runtime_overhead_gib=0,
        weights_override_bytes=int(8.5 * GIB),
    )
    assert no_overhead.slots == 254


def test_halving_context_doubles_slots() -> None:
    at_8k = slot_math(LLAMA_8B, H100, weights="fp8", kv_dtype="fp8", max_model_len=8192)
    at_4k = slot_math(LLAMA_8B, H100, weights="fp8", kv_dtype="fp8", max_model_len=4096)
    assert at_4k.slots in (2 * at_8k.slots, 2 * at_8k.slots + 1)
    assert at_8k.slots == 124  # the case study's "~125 slots at the default 8,192"


def test_fp8_on_a100_is_refused_with_alternatives() -> None:
    with pytest.raises(Fp8Unsupported) as err:
        slot_math(LLAMA_8B, A100, weights="fp8", kv_dtype="auto", max_model_len=4096)
    text = str(err.value)
    assert "8.0" in text and "bf16" in text and "H100-SXM5-80GB" in text and "L40S-48GB" in text
    with pytest.raises(Fp8Unsupported, match="FP8 KV cache"):
        slot_math(LLAMA_8B, A100, weights="bf16", kv_dtype="fp8", max_model_len=4096)


def test_context_too_long_names_the_largest_that_fits() -> None:
    l40s = gpu_info("L40S")
    m70 = lookup_model("llama-3.1-70b")
    with pytest.raises(ContextTooLong) as err:
        slot_math(m70, l40s, weights="fp8", kv_dtype="fp8", max_model_len=131072, tensor_parallel=2)
    fit = err.value.largest_fit
    assert 0 < fit < 131072 and fit % 16 == 0
    assert f"{fit:,}" in str(err.value)
    # The named figure really is the largest: it fits, one more block does not.
    assert slot_math(m70, l40s, weights="fp8", kv_dtype="fp8", max_model_len=fit, tensor_parallel=2).slots == 1
    with pytest.raises(ContextTooLong):
        slot_math(m70, l40s, weights="fp8", kv_dtype="fp8", max_model_len=fit + 16, tensor_parallel=2)


def test_context_above_the_model_maximum() -> None:
    with pytest.raises(ContextTooLong, match="at most 32,768") as err:
        slot_math(lookup_model("qwen2.5-7b"), H100, weights="fp8", kv_dtype="fp8", max_model_len=65536)
    assert err.value.largest_fit == 32768


def test_weights_that_do_not_fit_suggest_tensor_parallel() -> None:
    with pytest.raises(WeightsDoNotFit, match=r"use 2× A100-80GB-PCIe with tensor parallelism"):
        slot_math(lookup_model("llama-3.1-70b"), A100, weights="bf16", kv_dtype="auto", max_model_len=4096)


def test_gpt_oss_counts_sliding_layers_at_the_window() -> None:
    oss = lookup_model("openai/gpt-oss-20b")
    # 12 full-attention layers grow with context; 12 sliding layers hold 128 tokens at most.
    assert kv_bytes_per_token(oss, "auto") == 12 * 2 * 8 * 64 * 2
    per_layer_token = 2 * 8 * 64 * 2
    assert kv_bytes_per_sequence(oss, "auto", 4096) == 12 * per_layer_token * 4096 + 12 * per_layer_token * 128
    assert kv_bytes_per_sequence(oss, "auto", 64) == 24 * per_layer_token * 64
    with pytest.raises(ValueError, match="native"):
        weights_bytes(oss, "fp8")
