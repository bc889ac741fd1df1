"""The prior for capacity per instance: what `scalectl plan` sizes one server for.

One vLLM server is built for ``serving.target_concurrency`` requests in flight (its ``--max-num-seqs`` is
twice that) and can hold no more sequences than its KV-cache slots: the prior is the smaller of the two.
The fleet's own TTFT observations refine it (policies/capacity.py).
"""

from __future__ import annotations

from functools import lru_cache

from sizing.errors import SizingError
from sizing.gpus import UnknownGpu
from sizing.plan import make_plan
from sizing.spec import ServingSpec


@lru_cache(maxsize=256)
def capacity_prior(serving: ServingSpec, gpu: str, gpu_count: int) -> float:
    """Requests in flight one server carries at the latency target, before anything is learned."""
    target = float(serving.target_concurrency)
    try:
        plan = make_plan(
            serving.model,
            gpu,
            weights=serving.weights_dtype,
            kv=serving.kv_cache_dtype,
            max_model_len=serving.effective_max_model_len,
            gpu_memory_utilization=serving.gpu_memory_utilization,
            gpu_count=gpu_count,
            config_json=serving.config_json,
            runtime_overhead_gib=serving.runtime_overhead_gib,
        )
    except (SizingError, UnknownGpu, ValueError, OSError):
        return target  # a model or GPU the catalogue cannot size: the configured target stands
    return min(target, float(plan.math.slots))
