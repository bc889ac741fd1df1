"""How much of the tier's own instance another GPU variant is worth: its capacity in *primary units*.

A tier serves one model on its ``gpu`` × ``gpu_count`` (the primary) and may list ``variants``: other
hardware that can serve the same model. The decision core counts instances of the primary; a mixed fleet is
counted in primary units, each instance worth its capacity relative to a primary instance (an L40S serving
the 8B that does a quarter of what an H100 does counts 0.25).

The figure comes from the engine model (``launched_engine``: the flags ``scalectl vllm-args`` sets for that
GPU), on the two limits of one server, and a variant is worth the *smaller* of its two shares:

* compute: prompt tokens prefilled per second (``1 / prefill_s_per_token``; what the TTFT of long prompts
  depends on, and ``compute_prior``'s figure);
* decode: tokens generated per second at the tier's design point — ``target_concurrency`` sequences (fewer
  when the KV cache holds fewer at half of ``max-model-len`` each), each holding half of ``max-model-len``.

The smaller share is the cautious one: a variant overrated would leave the fleet short at the SLO, one
underrated only costs a little more. The decision core then learns the fleet's capacity per primary unit
from its own TTFT, as it does for a fleet of one GPU.
"""

from __future__ import annotations

from functools import lru_cache

from scalectl.sizing.engine import EngineProfile, launched_engine
from scalectl.sizing.spec import ServingSpec


def _limits(engine: EngineProfile, serving: ServingSpec) -> tuple[float, float]:
    """(prompt tokens per second, generated tokens per second at the design point) of one server."""
    half = max(1, engine.max_model_len // 2)
    batch = max(1, min(serving.target_concurrency, engine.kv_capacity_tokens // half, engine.max_num_seqs))
    decode = batch / float(engine.decode_step_s(float(batch), float(batch * half)))
    return 1.0 / engine.prefill_s_per_token, decode


@lru_cache(maxsize=256)
def capacity_units(serving: ServingSpec, gpu: str, gpu_count: int, primary_gpu: str, primary_count: int) -> float:
    """What one ``gpu_count``× ``gpu`` server is worth in servers of the primary (1.0 for the primary itself).

    Raises a ``SizingError`` (the sentence ``scalectl plan`` prints) when either cannot serve the model."""
    primary = _limits(launched_engine(serving, primary_gpu, primary_count), serving)
    if (gpu, gpu_count) == (primary_gpu, primary_count):
        return 1.0
    mine = _limits(launched_engine(serving, gpu, gpu_count), serving)
    return min(mine[0] / primary[0], mine[1] / primary[1])
