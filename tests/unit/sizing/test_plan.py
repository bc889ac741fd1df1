"""`make_plan` against the reference tables (agent-fleets-at-scale, multi-agent-gpu-infrastructure)."""

from __future__ import annotations

import math

import pytest

from scalectl.sizing.gpus import gpu_info
from scalectl.sizing.plan import make_plan


def test_reference_single_h100() -> None:
    p = make_plan("llama-3.1-8b", "H100-SXM5-80GB", weights="fp8", kv="fp8", max_model_len=4096, sessions=100)
    d = p.to_dict()
    assert d["kv_bytes_per_token"] == 65_536
    assert d["slots_per_gpu"] == 248
    assert (d["servers_needed"], d["gpus_needed"]) == (1, 1)
    assert d["cost_on_demand_per_hour"] == gpu_info("H100-SXM5-80GB").on_demand_per_hour


def test_1000_sessions_cost() -> None:
    # The reference: "~250 sessions per GPU at 4K" -> 4 H100 SXM at $2.40 = $9.60. That holds only without vLLM's
    # runtime reservation (254 slots); with it (248 slots) 1,000 sessions need a fifth GPU.
    bare = make_plan("llama-3.1-8b", "H100", sessions=1000, runtime_overhead_gib=0)
    assert (bare.math.slots, bare.gpus, bare.cost_on_demand_per_hour) == (254, 4, 9.60)
    kv = make_plan("llama-3.1-8b", "H100", sessions=1000, sessions_per_gpu=250)
    assert (kv.sessions_per_server, kv.gpus, kv.cost_on_demand_per_hour) == (248, 5, 12.00)
    assert any("capped at 248" in r for r in kv.reasons)


@pytest.mark.parametrize(
    ("gpu", "per_gpu", "sessions", "gpus", "cost"),
    [
        # agent-fleets-at-scale cost model: L40S 50, A100 80G PCIe 75, H100 (PCIe, $2.51) 100 per GPU.
        ("L40S", 50, 700, 14, 10.08),
        ("A100-80GB-PCIe", 75, 250, 4, 4.16),
        ("H100-PCIe", 100, 50, 1, 2.51),
        ("L40S", 50, 7_000, 140, 100.80),
        ("A100-80GB-PCIe", 75, 2_500, 34, 35.36),
        ("H100-PCIe", 100, 500, 5, 12.55),
        ("L40S", 50, 70_000, 1_400, 1008.00),
        ("A100-80GB-PCIe", 75, 25_000, 334, 347.36),
        ("H100-PCIe", 100, 5_000, 50, 125.50),
    ],
)
def test_reference_cost_table_rows(gpu: str, per_gpu: int, sessions: int, gpus: int, cost: float) -> None:
    p = make_plan("llama-3.1-8b", gpu, sessions=sessions, sessions_per_gpu=per_gpu)
    assert p.math.slots >= per_gpu  # the measured capacity, not KV, is the limit here
    assert (p.gpus, p.cost_on_demand_per_hour) == (gpus, cost)


def test_reference_cost_table_totals() -> None:
    for concurrent, total in ((1_000, 16.75), (10_000, 148.71), (100_000, 1480.86)):
        rows = [
            make_plan("llama-3.1-8b", "L40S", sessions=concurrent * 70 // 100, sessions_per_gpu=50),
            make_plan("llama-3.1-8b", "A100-80GB-PCIe", sessions=concurrent * 25 // 100, sessions_per_gpu=75),
            make_plan("llama-3.1-8b", "H100-PCIe", sessions=concurrent * 5 // 100, sessions_per_gpu=100),
        ]
        assert round(sum(r.cost_on_demand_per_hour or 0 for r in rows), 2) == total


@pytest.mark.parametrize(
    ("model", "context", "sessions", "kv_gib"),
    [
        # multi-agent-gpu-infrastructure VRAM table (FP8 KV): ~50, ~200, ~64, ~256 GB.
        ("llama-3.1-8b", 8192, 100, 50.0),
        ("llama-3.1-8b", 32768, 100, 200.0),
        ("llama-3.1-70b", 8192, 50, 62.5),
        ("llama-3.1-70b", 32768, 50, 250.0),
    ],
)
def test_kv_totals_match_the_vram_table(model: str, context: int, sessions: int, kv_gib: float) -> None:
    p = make_plan(model, "B200", kv="fp8", max_model_len=context, sessions=sessions)
    assert p.kv_gib_for_sessions == pytest.approx(kv_gib)


def test_70b_fp8_8k_50_sessions_needs_two_h100() -> None:
    p = make_plan("llama-3.3-70b", "H100-SXM5-80GB", max_model_len=8192, sessions=50)
    assert p.math.tensor_parallel == 2 and p.gpus == 2
    assert p.math.slots >= 50
    assert any("tensor parallel" in r for r in p.reasons)


def test_a100_gets_bf16_and_half_the_slots_of_fp8() -> None:
    a100 = make_plan("llama-3.1-8b", "A100-80GB-PCIe")
    h100 = make_plan("llama-3.1-8b", "H100-PCIe")
    assert (a100.math.weights_dtype, a100.math.kv_dtype) == ("bf16", "auto")
    assert (h100.math.weights_dtype, h100.math.kv_dtype) == ("fp8", "fp8")
    assert a100.math.kv_bytes_per_token == 2 * h100.math.kv_bytes_per_token
    assert a100.math.slots < h100.math.slots / 2


def test_spot_cost_only_where_spot_is_sold() -> None:
    assert make_plan("llama-3.1-8b", "L40S", sessions=10).cost_spot_per_hour is None
    p = make_plan("llama-3.1-8b", "H100-SXM5-80GB", sessions=1000)
    assert p.cost_spot_per_hour == round(math.ceil(1000 / p.math.slots) * 0.99, 2)
