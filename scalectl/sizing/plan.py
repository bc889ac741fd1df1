"""Capacity planning: KV slots per server, servers and GPUs for S concurrent sessions, and their $/hour."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from scalectl.sizing.errors import ContextTooLong, SizingError, WeightsDoNotFit
from scalectl.sizing.gpus import GIB, GpuInfo, gpu_info, supports_fp8
from scalectl.sizing.kv import (
    DEFAULT_RUNTIME_OVERHEAD_GIB,
    TP_SIZES,
    KvDtype,
    SlotMath,
    WeightsDtype,
    kv_bytes_for_sessions,
    slot_math,
)
from scalectl.sizing.models import ModelInfo, resolve_model


def choose_dtypes(
    model: ModelInfo, gpu: GpuInfo, weights: WeightsDtype | None, kv: KvDtype | None
) -> tuple[WeightsDtype, KvDtype, list[str]]:
    """Fill unset dtypes with the best the GPU runs; explain each choice."""
    reasons: list[str] = []
    fp8 = supports_fp8(gpu)
    if weights is None:
        if model.native_quantization:
            weights = "native"
            reasons.append(f"weights: {model.native_quantization} as published ({model.name} ships pre-quantized)")
        elif fp8:
            weights = "fp8"
            reasons.append(
                f"weights: fp8 ({gpu.name} is compute capability {gpu.compute_capability_str}); about half the BF16 "
                f"footprint, which leaves more memory for KV cache"
            )
        else:
            weights = "bf16"
            reasons.append(f"weights: bf16 ({gpu.name}, compute capability {gpu.compute_capability_str}, has no FP8)")
    if kv is None:
        kv = "fp8" if fp8 else "auto"
        reasons.append(
            "KV cache: fp8, 1 byte per element, twice the slots of BF16"
            if fp8
            else f"KV cache: model dtype (BF16, 2 bytes per element); FP8 KV needs compute capability 8.9+, "
            f"{gpu.name} is {gpu.compute_capability_str}"
        )
    return weights, kv, reasons


@dataclass(frozen=True, slots=True)
class Plan:
    math: SlotMath
    sessions: int | None
    sessions_per_server: int
    servers: int | None
    gpus: int | None
    price_on_demand_per_gpu: float
    price_spot_per_gpu: float | None
    cost_on_demand_per_hour: float | None
    cost_spot_per_hour: float | None
    kv_gib_for_sessions: float | None
    reasons: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        m = self.math
        return {
            "model": m.model,
            "gpu": m.gpu,
            "gpus_per_server": m.tensor_parallel,
            "weights_dtype": m.weights_dtype,
            "kv_cache_dtype": m.kv_dtype,
            "max_model_len": m.max_model_len,
            "gpu_memory_utilization": m.gpu_memory_utilization,
            "kv_bytes_per_token": m.kv_bytes_per_token,
            "kv_bytes_per_sequence": m.kv_bytes_per_sequence,
            "gpu_memory_gib": round(m.gpu_memory_bytes / GIB, 2),
            "usable_gib": round(m.usable_bytes / GIB, 2),
            "weights_gib": round(m.weights_gib, 2),
            "runtime_overhead_gib": round(m.overhead_bytes / GIB, 2),
            "kv_budget_gib": round(m.kv_budget_gib, 2),
            "slots_per_server": m.slots,
            "slots_per_gpu": m.slots // m.tensor_parallel,
            "sessions": self.sessions,
            "sessions_per_server": self.sessions_per_server,
            "servers_needed": self.servers,
            "gpus_needed": self.gpus,
            "kv_gib_for_sessions": None if self.kv_gib_for_sessions is None else round(self.kv_gib_for_sessions, 2),
            "price_on_demand_per_gpu_hour": self.price_on_demand_per_gpu,
            "price_spot_per_gpu_hour": self.price_spot_per_gpu,
            "cost_on_demand_per_hour": self.cost_on_demand_per_hour,
            "cost_spot_per_hour": self.cost_spot_per_hour,
            "reasons": list(self.reasons),
        }


def make_plan(
    model: str | ModelInfo,
    gpu: str | GpuInfo,
    *,
    weights: WeightsDtype | None = None,
    kv: KvDtype | None = None,
    max_model_len: int = 4096,
    gpu_memory_utilization: float = 0.90,
    sessions: int | None = None,
    gpu_count: int | None = None,
    sessions_per_gpu: int | None = None,
    config_json: str | Path | None = None,
    runtime_overhead_gib: float = DEFAULT_RUNTIME_OVERHEAD_GIB,
    weights_gib: float | None = None,
) -> Plan:
    """Size one server for ``model`` on ``gpu`` and, with ``sessions``, the fleet that serves them.

    ``gpu_count`` fixes the GPUs per server (tensor parallel); unset, the fewest that hold the weights.
    ``sessions_per_gpu`` caps a server below its KV slots when measured capacity (TTFT, compute) is lower.
    """
    m = model if isinstance(model, ModelInfo) else resolve_model(model, config_json)
    g = gpu if isinstance(gpu, GpuInfo) else gpu_info(gpu)
    w_dtype, kv_dtype, reasons = choose_dtypes(m, g, weights, kv)
    override = int(weights_gib * GIB) if weights_gib is not None else None
    common: dict[str, Any] = {
        "weights": w_dtype,
        "kv_dtype": kv_dtype,
        "max_model_len": max_model_len,
        "gpu_memory_utilization": gpu_memory_utilization,
        "runtime_overhead_gib": runtime_overhead_gib,
        "weights_override_bytes": override,
    }
    if gpu_count is not None:
        math_ = slot_math(m, g, tensor_parallel=gpu_count, **common)
    else:
        math_ = _best_tensor_parallel(m, g, common)
        if math_.tensor_parallel > 1:
            reasons.append(
                f"{math_.tensor_parallel} GPUs per server (tensor parallel): the weights "
                f"({math_.weights_gib:.1f} GiB) would take more than half of fewer GPUs' usable memory"
            )
    tp = math_.tensor_parallel
    per_server = math_.slots
    if sessions_per_gpu is not None:
        measured = sessions_per_gpu * tp
        if measured > math_.slots:
            reasons.append(f"sessions per GPU {sessions_per_gpu} exceeds the KV slots; capped at {math_.slots}")
        per_server = min(measured, math_.slots)
    servers = gpus = None
    cost_od = cost_spot = kv_gib = None
    if sessions is not None:
        servers = math.ceil(sessions / per_server) if sessions > 0 else 0
        gpus = servers * tp
        cost_od = round(gpus * g.on_demand_per_hour, 2)
        cost_spot = round(gpus * g.spot_per_hour, 2) if g.spot_per_hour is not None else None
        kv_gib = kv_bytes_for_sessions(m, kv_dtype, max_model_len, sessions) / GIB
        if servers:
            reasons.append(f"{sessions} sessions / {per_server} per server = {servers} server(s), {gpus} GPU(s)")
    return Plan(
        math=math_,
        sessions=sessions,
        sessions_per_server=per_server,
        servers=servers,
        gpus=gpus,
        price_on_demand_per_gpu=g.on_demand_per_hour,
        price_spot_per_gpu=g.spot_per_hour,
        cost_on_demand_per_hour=cost_od,
        cost_spot_per_hour=cost_spot,
        kv_gib_for_sessions=kv_gib,
        reasons=tuple(reasons),
    )


def _best_tensor_parallel(m: ModelInfo, g: GpuInfo, common: dict[str, Any]) -> SlotMath:
    """Fewest GPUs per server whose weights take at most half the usable memory (the rest is KV cache);
    failing that, the fewest that fit at all. Splitting a model that fits costs latency (all-reduce per layer)."""
    fits: list[SlotMath] = []
    first_error: SizingError | None = None
    for tp in TP_SIZES:
        if m.num_attention_heads % tp:
            continue
        try:
            candidate = slot_math(m, g, tensor_parallel=tp, **common)
        except (WeightsDoNotFit, ContextTooLong) as exc:
            first_error = first_error or exc
            continue
        if candidate.weights_bytes <= candidate.usable_bytes / 2:
            return candidate
        fits.append(candidate)
    if fits:
        return fits[0]
    assert first_error is not None
    raise first_error


def plan_as_dict(plan: Plan) -> dict[str, Any]:
    return plan.to_dict()


__all__ = ["Plan", "asdict", "choose_dtypes", "make_plan", "plan_as_dict"]
