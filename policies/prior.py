"""The prior for capacity per instance: the requests one server runs at once, as `scalectl plan` sizes it.

vLLM admits up to ``--max-num-seqs`` sequences (the sizing rules set it to 2×
``scalectl.serving.target_concurrency``, not capped by the KV cache, which vLLM fills by the blocks
sequences hold); every request beyond that waits, and its TTFT grows with the wait. Poisson arrivals fill
the last slots only in bursts, and a fuller batch makes every decode step slower, so queueing starts before
the limit: at about ``KNEE_SHARE`` of it (the calibrated instance model breaks between 80% and 90% of its
sequence slots). That is the prior. Where prefill compute runs out first (long prompts), TTFT breaks
earlier: ``compute_prior`` is that second limit, in tokens per second, and the fleet's own TTFT
observations bring the first one down (policies/capacity.py).
"""

from __future__ import annotations

from functools import lru_cache

from scalectl.policies.boot import BOOT_QUANTILE
from scalectl.policies.core.constants import KNEE_SHARE
from scalectl.sizing.engine import launched_engine
from scalectl.sizing.errors import SizingError
from scalectl.sizing.gpus import UnknownGpu
from scalectl.sizing.spec import ServingSpec
from scalectl.sizing.vllm_args import max_num_seqs


@lru_cache(maxsize=256)
def capacity_prior(serving: ServingSpec, gpu: str, gpu_count: int) -> float:
    """Requests in flight one server carries at the latency target, before anything is learned."""
    return admitted_sequences(serving, gpu, gpu_count) * KNEE_SHARE


@lru_cache(maxsize=256)
def admitted_sequences(serving: ServingSpec, gpu: str, gpu_count: int) -> float:
    """The sequences one server runs at once (``--max-num-seqs``, as ``tune_vllm_args`` sets it): every
    request beyond them waits. The KV cache does not cap it: vLLM admits by the blocks sequences hold."""
    return float(max_num_seqs(serving.target_concurrency))


@lru_cache(maxsize=256)
def compute_prior(serving: ServingSpec, gpu: str, gpu_count: int) -> float | None:
    """Tokens per second one server computes — prompt tokens prefilled and tokens generated each cost
    2 x active parameters FLOPs — at the engine model's effective peak (what `scalectl plan` and the
    simulator assume). No knee of its own: the policy's target utilisation is the headroom. None when the
    catalogue cannot size the model or GPU."""
    try:
        engine = launched_engine(serving, gpu, gpu_count)
    except (SizingError, UnknownGpu, ValueError, OSError):
        return None
    return 1.0 / engine.prefill_s_per_token


@lru_cache(maxsize=256)
def boot_prior(serving: ServingSpec, gpu_count: int) -> float | None:
    """Create → serving (seconds) at ``BOOT_QUANTILE`` from the boot model (a GPU VM of unknown provider, the
    cold path: image, weights, engine start), until the tier has measured its own boots. None when the
    catalogue does not know the model."""
    from scalectl.sizing.boot import boot_model
    from scalectl.sizing.models import resolve_model

    try:
        model = resolve_model(serving.model, serving.config_json)
    except (SizingError, ValueError, KeyError, OSError):
        return None
    return boot_model("", gpu_count, model).quantiles(BOOT_QUANTILE)[0]
