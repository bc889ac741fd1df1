"""Turn a tier's load spec into the objects the fleet pulls requests or tasks from, tick by tick.

Open-loop traffic is generated in fixed one-hour blocks, each from its own seeded generator, so the same
workload gives the same requests whatever the tick length (our controller and the baselines poll at
different rates but must see identical traffic).
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable, Iterator

import numpy as np

from scalectl.simulator.requests import Drawn, FloatArray, Requests, draw, fresh
from scalectl.simulator.workloads.sessions import ClosedLoopSessions
from scalectl.simulator.workloads.shapes import Shape, evaluate, peak_over
from scalectl.simulator.workloads.spec import BatchLoad, PoissonLoad, SessionsLoad, TraceLoad, Workload
from scalectl.simulator.workloads.traces import read_trace, replay
from scalectl.sizing.engine import EngineProfile

BLOCK_S = 3600.0
KEPT_ROWS = 30_000_000  # at most this many drawn requests kept across runs (about 1.4 GB; a busy day is 17 M)


class KeptArrivals:
    """Open-loop arrivals kept across runs in this process, for a search that replays one workload many
    times (``scalectl tune``): drawing a busy day's hours cost about a tenth of each trial. Off unless asked
    (``keep_arrivals`` for a worker's life, ``kept`` for a block): a single run keeps only the hours it is
    in. The arrays are read-only (the fleet copies them into request rows), so sharing them cannot leak
    one run into the next."""

    def __init__(self, limit: int = KEPT_ROWS) -> None:
        self.limit = limit
        self.on = False
        self._drawn: dict[tuple[object, ...], Drawn] = {}
        self._rows = 0

    def keep(self) -> None:
        self.on = True

    @contextlib.contextmanager
    def kept(self) -> Iterator[None]:
        """Kept while inside; dropped after."""
        self.keep()
        try:
            yield
        finally:
            self.on, self._drawn, self._rows = False, {}, 0

    def get(self, key: tuple[object, ...]) -> Drawn | None:
        return self._drawn.get(key) if self.on else None

    def put(self, key: tuple[object, ...], drawn: Drawn) -> None:
        if not self.on or self._rows + drawn.t.shape[0] > self.limit:
            return
        drawn.freeze()
        self._drawn[key] = drawn
        self._rows += drawn.t.shape[0]


KEPT = KeptArrivals()


def keep_arrivals() -> None:
    """Keep arrivals across runs in this process from now on (a search worker's initializer)."""
    KEPT.keep()


def tier_rng(seed: int, tier: str, *more: int) -> np.random.Generator:
    """A generator for one tier (and block), independent of the other tiers and of dict order."""
    return np.random.default_rng([seed, zlib.crc32(tier.encode()), *more])


def _poisson_times(
    rng: np.random.Generator, rate: float, shapes: list[Shape], t0: float, t1: float, start_epoch: float
) -> FloatArray:
    """A non-homogeneous Poisson process on [t0, t1) by thinning (rate × the shape product)."""
    peak = rate * peak_over(shapes, t0, t1, start_epoch)
    if peak <= 0:
        return np.empty(0)
    n = rng.poisson(peak * (t1 - t0))
    t = np.sort(rng.uniform(t0, t1, n))
    if shapes:
        keep = rng.random(n) * peak < rate * evaluate(shapes, t, start_epoch)
        t = t[keep]
    return t


class PoissonSource:
    def __init__(self, tier: str, load: PoissonLoad, workload: Workload, profile: EngineProfile) -> None:
        self._tier, self._load, self._seed = tier, load, workload.seed
        self._start_epoch = workload.start_epoch
        self._overhead = (profile.overhead_median_s, profile.overhead_sigma)
        self._blocks: dict[int, Drawn] = {}
        # Everything an hour's draw depends on, for arrivals kept across runs (``KEPT``).
        self._key = (self._seed, tier, self._start_epoch, self._overhead, load.model_dump_json())

    def _block(self, k: int) -> Drawn:
        if k not in self._blocks:
            if len(self._blocks) > 2:
                self._blocks.pop(min(self._blocks))
            drawn = KEPT.get((*self._key, k))
            if drawn is None:
                drawn = self._draw(k)
                KEPT.put((*self._key, k), drawn)
            self._blocks[k] = drawn
        return self._blocks[k]

    def _draw(self, k: int) -> Drawn:
        rng = tier_rng(self._seed, self._tier, k)
        load = self._load
        t = _poisson_times(rng, load.rate, load.shape, k * BLOCK_S, (k + 1) * BLOCK_S, self._start_epoch)
        n_in = load.input_tokens.dist().sample(rng, t.shape[0])
        n_out = load.output_tokens.dist().sample(rng, t.shape[0])
        cached = np.floor(n_in * load.prefix_cache_hit)
        return draw(t, n_in, n_out, rng, *self._overhead, n_cached=cached)

    def _blocks_over(self, t0: float, t1: float) -> list[Drawn]:
        return [self._block(k) for k in range(int(t0 // BLOCK_S), int(np.ceil(t1 / BLOCK_S)))]

    def arrivals(self, t0: float, t1: float) -> Requests:
        return Requests.concat([block.between(t0, t1) for block in self._blocks_over(t0, t1)])

    def arrival_times(self, t0: float, t1: float) -> FloatArray:
        """When the requests of [t0, t1) arrive (what the baselines size by), without building their rows."""
        parts = [block.times_between(t0, t1) for block in self._blocks_over(t0, t1)]
        return np.concatenate(parts) if parts else np.empty(0)


class TraceSource:
    def __init__(self, tier: str, load: TraceLoad, workload: Workload, profile: EngineProfile) -> None:
        trace = read_trace(workload.trace_path(load), load.format)
        rng = tier_rng(workload.seed, tier)
        start = workload.start_epoch
        shape: Callable[[FloatArray], FloatArray] | None = (
            (lambda t: evaluate(load.shape, t, start)) if load.shape else None
        )
        t, rows = replay(
            trace,
            duration_s=workload.duration,
            rate_scale=load.rate_scale,
            time_scale=load.time_scale,
            repeat=load.repeat,
            offset_s=load.offset,
            shape=shape,
            rng=rng,
            replication=load.replication,
        )
        n_in = trace.n_in[rows]
        cached = trace.n_cached[rows] if load.prefix_cache_hit is None else np.floor(n_in * load.prefix_cache_hit)
        self._drawn = draw(
            t, n_in, trace.n_out[rows], rng, profile.overhead_median_s, profile.overhead_sigma, n_cached=cached
        )

    def arrivals(self, t0: float, t1: float) -> Requests:
        return self._drawn.between(t0, t1)

    def arrival_times(self, t0: float, t1: float) -> FloatArray:
        return self._drawn.times_between(t0, t1)


def sessions_source(tier: str, load: SessionsLoad, workload: Workload, profile: EngineProfile) -> ClosedLoopSessions:
    start = workload.start_epoch
    peak = peak_over(load.shape, 0.0, workload.duration, start, resolution_s=60.0, margin=1.0)
    max_sessions = max(1, round(load.sessions * peak))

    # Active sessions per minute, computed once (the shape is read at one-minute resolution).
    minutes = np.arange(0.0, workload.duration + 60.0, 60.0)
    per_minute = np.rint(load.sessions * evaluate(load.shape, minutes, start)).astype(np.int64)

    def active(t: float) -> int:
        return int(per_minute[min(max(int(t // 60.0), 0), per_minute.shape[0] - 1)])

    return ClosedLoopSessions(
        max_sessions,
        active,
        load.think_time[0],
        load.think_time[1],
        load.input_tokens.dist(),
        load.output_tokens.dist(),
        tier_rng(workload.seed, tier),
        profile.overhead_median_s,
        profile.overhead_sigma,
        cached_share=load.prefix_cache_hit,
    )


class BatchTasks:
    """Celery tasks of a batch tier: when each is queued and how long it runs once picked up."""

    def __init__(self, tier: str, load: BatchLoad, workload: Workload) -> None:
        self._tier, self._load, self._seed = tier, load, workload.seed
        self._start_epoch = workload.start_epoch
        rng = tier_rng(workload.seed, tier, 1_000_000)
        times = []
        for burst in load.bursts:
            at = burst.at
            while at < workload.duration:
                times.append(np.sort(at + rng.uniform(0.0, burst.over, burst.tasks)))
                if not burst.every:
                    break
                at += burst.every
        self._burst_times = np.sort(np.concatenate(times)) if times else np.empty(0)
        self._burst_runtime = self._runtime(rng, self._burst_times.shape[0])
        self._blocks: dict[int, tuple[FloatArray, FloatArray]] = {}

    def _runtime(self, rng: np.random.Generator, n: int) -> FloatArray:
        mean, cv = self._load.task_time.mean, self._load.task_time.cv
        if cv <= 0:
            return np.full(n, mean)
        sigma2 = np.log1p(cv**2)
        return mean * np.exp(np.sqrt(sigma2) * rng.standard_normal(n) - sigma2 / 2)

    def _block(self, k: int) -> tuple[FloatArray, FloatArray]:
        if k not in self._blocks:
            if len(self._blocks) > 2:
                self._blocks.pop(min(self._blocks))
            rng = tier_rng(self._seed, self._tier, k)
            load = self._load
            t = _poisson_times(rng, load.rate, load.shape, k * BLOCK_S, (k + 1) * BLOCK_S, self._start_epoch)
            self._blocks[k] = (t, self._runtime(rng, t.shape[0]))
        return self._blocks[k]

    def tasks(self, t0: float, t1: float) -> tuple[FloatArray, FloatArray]:
        """Queue times in [t0, t1) and run times, sorted by queue time."""
        lo, hi = np.searchsorted(self._burst_times, [t0, t1])
        times, runs = [self._burst_times[lo:hi]], [self._burst_runtime[lo:hi]]
        if self._load.rate > 0:
            for k in range(int(t0 // BLOCK_S), int(np.ceil(t1 / BLOCK_S))):
                bt, br = self._block(k)
                a, b = np.searchsorted(bt, [t0, t1])
                times.append(bt[a:b])
                runs.append(br[a:b])
        t, r = np.concatenate(times), np.concatenate(runs)
        order = np.argsort(t, kind="stable")
        return t[order], r[order]

    def all_tasks(self, duration: float) -> tuple[FloatArray, FloatArray]:
        return self.tasks(0.0, duration)


def fresh_requests(t: FloatArray, n_in: FloatArray, n_out: FloatArray) -> Requests:
    """Deterministic requests for tests: no client overhead, step phase 0.5."""
    return fresh(t, n_in, n_out, np.full(t.shape[0], 0.5), np.zeros(t.shape[0]))
