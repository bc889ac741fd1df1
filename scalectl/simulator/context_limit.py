"""Warnings a workload earns before it runs: requests its tiers' vLLM would refuse, and tuned-flag warnings.

vLLM answers HTTP 400 to a request whose prompt + output exceed ``--max-model-len``; the simulator refuses
them too (``serving_tick.too_long``) and counts them as misses. Saying so up front, with the share of the
traffic it concerns, tells the reader why a tier's SLO cannot be met whatever the fleet size.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from scalectl.simulator.fleet import TierLike, TierModel
from scalectl.simulator.workloads.spec import PoissonLoad, SessionsLoad, TraceLoad, Workload
from scalectl.simulator.workloads.traces import read_trace
from scalectl.sizing.vllm_args import tune_vllm_args

SAMPLES = 100_000  # draws of a token distribution to estimate the share over the limit (seeded: reproducible)


def share_over(load: object, workload: Workload, max_model_len: int) -> float | None:
    """The share of a tier's requests whose prompt + output exceed ``max_model_len`` (None: not serving)."""
    if isinstance(load, TraceLoad):
        trace = read_trace(workload.trace_path(load), load.format)
        if not trace.n_in.shape[0]:
            return 0.0
        return float(np.mean(trace.n_in + trace.n_out > max_model_len))
    if isinstance(load, PoissonLoad | SessionsLoad):
        rng = np.random.default_rng(0)
        n_in = load.input_tokens.dist().sample(rng, SAMPLES)
        n_out = load.output_tokens.dist().sample(rng, SAMPLES)
        return float(np.mean(n_in + n_out > max_model_len))
    return None


def context_warnings(workload: Workload, models: Mapping[str, TierModel], tiers: Mapping[str, TierLike]) -> list[str]:
    """One line per serving tier with requests over its max-model-len, and its tuned flags' warnings."""
    lines = []
    for name, model in models.items():
        if model.profile is None:
            continue
        limit = model.profile.max_model_len
        share = share_over(model.load, workload, limit)
        if share:
            lines.append(
                f"tier {name}: {share:.1%} of the workload's requests have prompt + output over the tier's "
                f"max_model_len {limit:,}; vLLM refuses them (HTTP 400) and they count as misses "
                "(rejected_too_long); raise serving.max_model_len to cover them"
            )
        tier = tiers[name]
        tuned = tune_vllm_args(tier.serving, tier.gpu, tier.gpu_count)
        warned = [note.removeprefix("warning: ") for note in tuned.notes if note.startswith("warning:")]
        lines += [f"tier {name}: {note}" for note in warned]
    return lines
