"""A steady start: the traffic a fleet served before the run, so a run opens the way a running fleet does.

With ``warmup: steady`` (the default) the run begins ``steady_warmup_s`` before its start: the controller and
the baselines serve the workload's opening traffic held at its level at t = 0 (the shape's multiplier at the
start, for as long as the warm-up lasts), so at t = 0 the fleet is sized for it, instances are serving, and
the signals' windows and the policy's state hold a history. Open-loop tiers draw that traffic here; a
sessions tier keeps its opening number of users (its source holds the level before t = 0 by itself); a
batch queue starts empty (a task queued in the warm-up would be work the report does not count). What the
warm-up costs and the requests sent in it are not in the report. ``warmup: cold`` opens with nothing run.
"""

from __future__ import annotations

import math

import numpy as np

from scalectl.simulator.requests import Drawn, FloatArray, Requests, draw
from scalectl.simulator.workloads.shapes import evaluate
from scalectl.simulator.workloads.sources import PoissonSource, TraceSource, tier_rng
from scalectl.simulator.workloads.spec import PoissonLoad, TraceLoad, Workload
from scalectl.simulator.workloads.traces import read_trace, replay
from scalectl.sizing.engine import EngineProfile

# Past the longest boot, how long the opening traffic runs before t = 0: the scale-in stabilisation windows
# (5-10 minutes) and the signals' one-minute windows fill, and a first overshoot has time to settle.
SETTLE_S = 900.0
WARMUP_STREAM = 2_000_000  # the opening traffic's random stream, apart from the hour blocks (0, 1, ...)


def steady_warmup_s(workload: Workload, tick_s: float, longest_boot_s: float) -> float:
    """How long before the start a steady run begins: the longest boot the run can draw (``Boots.longest_s``)
    and ``SETTLE_S``, in whole ticks (so a tick starts at t = 0); 0 for ``warmup: cold``."""
    if workload.warmup == "cold":
        return 0.0
    return math.ceil((longest_boot_s + SETTLE_S) / tick_s - 1e-9) * tick_s


def opening_level(load: PoissonLoad | TraceLoad, workload: Workload) -> float:
    """The shapes' multiplier at t = 0 (0 for a trace whose replay starts later: nothing arrives at t = 0)."""
    if isinstance(load, TraceLoad) and load.offset > 0:
        return 0.0
    return float(evaluate(load.shape, np.zeros(1), workload.start_epoch)[0])


def opening_drawn(
    tier: str, load: PoissonLoad | TraceLoad, workload: Workload, profile: EngineProfile, warmup_s: float
) -> Drawn:
    """The opening traffic over [-warmup_s, 0): the load at its t = 0 level, drawn from a stream of its own."""
    rng = tier_rng(workload.seed, tier, WARMUP_STREAM)
    level = opening_level(load, workload)
    overhead = (profile.overhead_median_s, profile.overhead_sigma)
    if isinstance(load, PoissonLoad):
        n = int(rng.poisson(load.rate * level * warmup_s))
        t = np.sort(rng.uniform(-warmup_s, 0.0, n))
        n_in = load.input_tokens.dist().sample(rng, n)
        cached = np.floor(n_in * load.prefix_cache_hit)
        return draw(t, n_in, load.output_tokens.dist().sample(rng, n), rng, *overhead, n_cached=cached)
    trace = read_trace(workload.trace_path(load), load.format)
    if level <= 0:
        return draw(np.empty(0), np.empty(0), np.empty(0), rng, *overhead)
    t, rows = replay(
        trace, duration_s=warmup_s, rate_scale=load.rate_scale * level, time_scale=load.time_scale, repeat=0,
        offset_s=0.0, shape=None, rng=rng, replication=load.replication,
    )  # fmt: skip
    n_in = trace.n_in[rows]
    cached = trace.n_cached[rows] if load.prefix_cache_hit is None else np.floor(n_in * load.prefix_cache_hit)
    return draw(t - warmup_s, n_in, trace.n_out[rows], rng, *overhead, n_cached=cached)


class OpeningTraffic:
    """An open-loop source with the opening traffic before t = 0 and the workload's own from t = 0."""

    def __init__(self, opening: Drawn, source: PoissonSource | TraceSource) -> None:
        self._opening, self._source = opening, source

    def arrivals(self, t0: float, t1: float) -> Requests:
        parts = []
        if t0 < 0:
            parts.append(self._opening.between(t0, min(t1, 0.0)))
        if t1 > 0:
            parts.append(self._source.arrivals(max(t0, 0.0), t1))
        return Requests.concat(parts)

    def arrival_times(self, t0: float, t1: float) -> FloatArray:
        parts = []
        if t0 < 0:
            parts.append(self._opening.times_between(t0, min(t1, 0.0)))
        if t1 > 0:
            parts.append(self._source.arrival_times(max(t0, 0.0), t1))
        return np.concatenate(parts)
