"""How much load one instance sustains at the TTFT target, measured on the instance model itself.

For a closed-loop tier the unit is sessions; for open-loop tiers it is requests per second with the tier's
own token mix (a trace's rows are resampled). Each probe runs one instance on virtual time; a bisection
finds the largest load whose TTFT p95 stays within the target — or, with ``quantile``, the largest load at
which that share of requests gets its first token within the target (the SLO the report scores).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from scalectl.simulator.requests import Requests, draw
from scalectl.simulator.serving_pool import ServingPool
from scalectl.simulator.workloads.sessions import ClosedLoopSessions
from scalectl.simulator.workloads.spec import PoissonLoad, SessionsLoad, TierLoad, TraceLoad, Workload
from scalectl.simulator.workloads.traces import read_trace
from scalectl.sizing.engine import EngineProfile

PROBE_WARMUP_S = 60.0
PROBE_MEASURE_S = 240.0
TICK_S = 5.0


@dataclass(frozen=True, slots=True)
class Capacity:
    unit: str  # "sessions" or "req/s"
    per_instance: float  # the most load one instance carries with TTFT p95 (or the asked quantile) <= target
    concurrency: float  # requests inside one instance at that load (running + waiting), on average
    rate: float = 0.0  # requests per second one instance serves at that load (= per_instance for req/s)


@dataclass(frozen=True, slots=True)
class _Probe:
    p95: float  # the probed TTFT quantile (p95 unless asked otherwise)
    concurrency: float
    rate: float = 0.0


class _Mix:
    """Token counts to draw from: a trace's rows, or the load's distributions."""

    def __init__(self, n_in: np.ndarray, n_out: np.ndarray, n_cached: np.ndarray) -> None:
        self.n_in, self.n_out, self.n_cached = n_in, n_out, n_cached

    def draw(self, rng: np.random.Generator, t: np.ndarray, profile: EngineProfile) -> Requests:
        rows = rng.integers(0, self.n_in.shape[0], t.shape[0])
        return draw(
            t, self.n_in[rows], self.n_out[rows], rng, profile.overhead_median_s, profile.overhead_sigma,
            n_cached=self.n_cached[rows],
        ).rows()  # fmt: skip


class _PoissonProbeSource:
    def __init__(self, rate: float, mix: _Mix, profile: EngineProfile, seed: int) -> None:
        self._rate, self._mix, self._profile = rate, mix, profile
        self._rng = np.random.default_rng(seed)

    def arrivals(self, t0: float, t1: float) -> Requests:
        n = self._rng.poisson(self._rate * (t1 - t0))
        return self._mix.draw(self._rng, np.sort(self._rng.uniform(t0, t1, n)), self._profile)


def _probe(profile: EngineProfile, source: object, quantile: float = 0.95) -> _Probe:
    pool = ServingPool(profile)
    pool.set_instances(["probe"])
    t = 0.0
    while t < PROBE_WARMUP_S + PROBE_MEASURE_S:
        pool.advance(t, t + TICK_S, source)  # type: ignore[arg-type]
        t += TICK_S
    warm = int(PROBE_WARMUP_S / TICK_S)
    ttft = np.concatenate(pool.record.ttft[warm:])
    rows = np.asarray(pool.record.timeline[warm:], dtype=np.float64)
    concurrency = float((rows[:, 3] + rows[:, 4]).mean()) if rows.shape[0] else 0.0
    rate = float(rows[:, 1].sum()) / PROBE_MEASURE_S if rows.shape[0] else 0.0
    return _Probe(float(np.quantile(ttft, quantile)) if ttft.shape[0] else float("inf"), concurrency, rate)


def _sessions_probe(profile: EngineProfile, load: SessionsLoad, n: int, seed: int, quantile: float = 0.95) -> _Probe:
    source = ClosedLoopSessions(
        n, lambda _t: n, load.think_time[0], load.think_time[1], load.input_tokens.dist(),
        load.output_tokens.dist(), np.random.default_rng(seed), profile.overhead_median_s, profile.overhead_sigma,
        cached_share=load.prefix_cache_hit,
    )  # fmt: skip
    return _probe(profile, source, quantile)


def sessions_capacity(profile: EngineProfile, load: SessionsLoad, seed: int = 0, quantile: float = 0.95) -> Capacity:
    target = load.ttft_target
    lo, hi = 0, max(2, profile.max_num_seqs // 2)
    best = _Probe(0.0, 0.0)
    while _sessions_probe(profile, load, hi, seed, quantile).p95 <= target and hi < 100_000:
        lo, hi = hi, hi * 2
    while hi - lo > max(1, lo // 50):
        mid = (lo + hi) // 2
        probe = _sessions_probe(profile, load, mid, seed, quantile)
        if probe.p95 <= target:
            lo, best = mid, probe
        else:
            hi = mid
    if lo and best.concurrency == 0.0:
        best = _sessions_probe(profile, load, lo, seed, quantile)
    return Capacity("sessions", float(lo), best.concurrency, best.rate)


def rate_capacity(profile: EngineProfile, mix: _Mix, target: float, seed: int = 0, quantile: float = 0.95) -> Capacity:
    def probe(rate: float) -> _Probe:
        return _probe(profile, _PoissonProbeSource(rate, mix, profile, seed), quantile)

    lo, hi = 0.0, 1.0
    best = _Probe(0.0, 0.0)
    while (p := probe(hi)).p95 <= target and hi < 1e6:
        lo, hi, best = hi, hi * 2, p
    while hi - lo > max(0.02 * lo, 0.01):
        mid = (lo + hi) / 2
        p = probe(mid)
        if p.p95 <= target:
            lo, best = mid, p
        else:
            hi = mid
    return Capacity("req/s", lo, best.concurrency, lo)


def mix_for(load: TierLoad, workload: Workload, seed: int = 0) -> _Mix:
    if isinstance(load, TraceLoad):
        trace = read_trace(workload.trace_path(load), load.format)
        cached = trace.n_cached if load.prefix_cache_hit is None else np.floor(trace.n_in * load.prefix_cache_hit)
        return _Mix(trace.n_in, trace.n_out, cached)
    assert isinstance(load, PoissonLoad | SessionsLoad)
    rng = np.random.default_rng(seed)
    n_in = load.input_tokens.dist().sample(rng, 20_000).astype(np.float64)
    n_out = load.output_tokens.dist().sample(rng, 20_000).astype(np.float64)
    return _Mix(n_in, n_out, np.floor(n_in * load.prefix_cache_hit))


@lru_cache(maxsize=64)
def _cached_capacity(
    profile: EngineProfile, load_json: str, workload_json: str, base_dir: str, quantile: float
) -> Capacity:
    workload = Workload.model_validate_json(workload_json).model_copy(update={"base_dir": base_dir})
    load = next(v for v in workload.tiers.values() if v.model_dump_json() == load_json)
    if isinstance(load, SessionsLoad):
        return sessions_capacity(profile, load, workload.seed, quantile)
    assert isinstance(load, PoissonLoad | TraceLoad), "batch tiers have no TTFT capacity"
    mix = mix_for(load, workload, workload.seed)
    return rate_capacity(profile, mix, load.ttft_target, workload.seed, quantile)


def capacity_for(profile: EngineProfile, load: TierLoad, workload: Workload, quantile: float = 0.95) -> Capacity:
    """Per-instance capacity at the SLO for a serving tier's load (cached per profile, load and quantile):
    the most load at which ``quantile`` of requests get their first token within the target."""
    return _cached_capacity(profile, load.model_dump_json(), workload.model_dump_json(), workload.base_dir, quantile)
