"""The fleet: every tier's instances under its workload, advanced tick by tick on virtual time.

Whoever drives it (the controller with its simulated cloud, or a baseline) tells it which instances are
ready, draining or gone; the fleet routes the tier's traffic over them and answers with the tier's signals,
exactly the figures the controller would read from vLLM /metrics and the Celery broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from scalectl.policies.types import Signals
from scalectl.simulator.batch_pool import BatchPool, BatchRecord
from scalectl.simulator.mixed_pool import MixedPool
from scalectl.simulator.serving_pool import HoldBounds, PoolRecord, ServingPool
from scalectl.simulator.workloads.opening import OpeningTraffic, opening_drawn
from scalectl.simulator.workloads.sources import BatchTasks, PoissonSource, TraceSource, sessions_source
from scalectl.simulator.workloads.spec import BatchLoad, PoissonLoad, SessionsLoad, TierLoad, TraceLoad, Workload
from scalectl.sizing.engine import EngineProfile, launched_engine
from scalectl.sizing.gpus import gpu_info
from scalectl.sizing.spec import ServingSpec


class TierLike(Protocol):
    """What the fleet needs from a tier's configuration (``scalectl.tiers.config.TierSpec`` fits)."""

    @property
    def gpu(self) -> str: ...
    @property
    def gpu_count(self) -> int: ...
    @property
    def capacity(self) -> str: ...
    @property
    def serving(self) -> ServingSpec: ...


@dataclass(frozen=True, slots=True)
class TierModel:
    """A tier as the simulator sees it: its load, its engine (serving tiers) and its price per instance."""

    name: str
    load: TierLoad
    gpu: str
    gpu_count: int
    price_per_hour: float
    profile: EngineProfile | None  # None for batch tiers (tasks have their own run time)
    window_s: float = 60.0
    hold: HoldBounds | None = None  # the activator's bounds at zero (None: off, or not a configured tier)
    # A tier with variants: every hardware it may run on, the primary first (``hardware_label`` -> its
    # engine and what one instance is worth in primary units). Empty: the tier runs on ``gpu`` alone.
    variants: Mapping[str, tuple[EngineProfile, float]] = field(default_factory=dict)

    @property
    def kind(self) -> Literal["serving", "batch"]:
        return "batch" if isinstance(self.load, BatchLoad) else "serving"


def engine_for(tier: TierLike) -> EngineProfile:
    """The engine the daemon would launch for this tier: ``tune_vllm_args`` (dtypes, max-num-seqs, memory
    utilisation, batched tokens, max-model-len, tensor parallelism, the tier's ``extra_args``) on its GPU."""
    return launched_engine(tier.serving, tier.gpu, tier.gpu_count)


def tier_models(workload: Workload, tiers: Mapping[str, TierLike]) -> dict[str, TierModel]:
    """Pair each workload tier with its configuration; a workload tier missing from the config is an error."""
    missing = sorted(set(workload.tiers) - set(tiers))
    if missing:
        raise ValueError(
            f"workload tiers {', '.join(missing)} are not in the tier configuration (known: {', '.join(tiers)})"
        )
    models = {}
    for name, load in workload.tiers.items():
        tier = tiers[name]
        info = gpu_info(tier.gpu)
        spot = tier.capacity == "spot" and info.spot_per_hour is not None
        price = (info.spot_per_hour if spot and info.spot_per_hour else info.on_demand_per_hour) * tier.gpu_count
        profile = None
        if not isinstance(load, BatchLoad):
            profile = engine_for(tier)
        variants = _variants(tier, load, profile)
        activator = getattr(tier, "activator", None)  # TierSpec has one; other TierLikes may not
        hold = None
        if activator is not None and activator.enabled:
            hold = HoldBounds(activator.max_held, activator.max_wait)
        models[name] = TierModel(name, load, info.name, tier.gpu_count, price, profile, hold=hold, variants=variants)
    return models


def _variants(tier: TierLike, load: TierLoad, profile: EngineProfile | None) -> dict[str, tuple[EngineProfile, float]]:
    """Each hardware of a tier with ``variants`` (``TierSpec.hardware``): its engine, as the daemon would
    tune it there, and its worth in primary units (the controller's figure, which routing weights by)."""
    listed = getattr(tier, "variants", ())
    if not listed or profile is None:
        return {}
    if not isinstance(load, PoissonLoad | TraceLoad):
        raise ValueError(
            "variants are simulated for open-loop loads (kind: poisson or trace) only: a closed-loop session's "
            "next request depends on the instance its last one ran on; remove `variants:` or use an open-loop load"
        )
    out: dict[str, tuple[EngineProfile, float]] = {}
    for gpu, count in tier.hardware:  # type: ignore[attr-defined]  # TierSpec's: those with variants have it
        engine = profile if not out else launched_engine(tier.serving, gpu, count)
        out[hardware_label(gpu, count)] = (engine, float(tier.capacity_units(gpu, count)))  # type: ignore[attr-defined]
    return out


def hardware_label(gpu: str, gpu_count: int) -> str:
    """``H100-SXM5-80GB``, or ``2× L40S-48GB``: how reports name a variant (as `scalectl status` does)."""
    return gpu if gpu_count == 1 else f"{gpu_count}× {gpu}"


@dataclass(slots=True)
class TierMeter:
    serving_seconds: float = 0.0  # ready + draining instance-seconds (what the fleet saw serve)
    billed_seconds: float = 0.0  # instance-seconds the driver reported as billed (incl. provisioning)
    billed_reported: bool = False
    peak_ready: int = 0
    interruptions: int = 0
    billed_timeline: list[tuple[float, int]] = field(default_factory=list)


class Fleet:
    """``warmup_s`` > 0: open-loop tiers also carry their opening traffic over [-warmup_s, 0) (a steady start,
    ``workloads/opening.py``); whoever drives the fleet through it calls ``open_report`` at t = 0."""

    def __init__(self, workload: Workload, models: Mapping[str, TierModel], warmup_s: float = 0.0) -> None:
        self.workload = workload
        self.models = dict(models)
        self.serving: dict[str, ServingPool | MixedPool] = {}
        self.batch: dict[str, BatchPool] = {}
        self._sources: dict[str, object] = {}
        self._tasks: dict[str, BatchTasks] = {}
        self._members: dict[str, tuple[set[str], set[str]]] = {}
        self.meters: dict[str, TierMeter] = {}
        self._slo_cursor: dict[str, tuple[int, int, int]] = {}  # tier -> (chunks counted, met, judged)
        for name, model in self.models.items():
            load = model.load
            self.meters[name] = TierMeter()
            self._members[name] = (set(), set())
            if isinstance(load, BatchLoad):
                self.batch[name] = BatchPool(load.concurrency, model.window_s)
                self._tasks[name] = BatchTasks(name, load, workload)
                continue
            assert model.profile is not None
            # Clients that give up and the activator's bounds: open loop only (a closed-loop session whose
            # request was cut would never send again).
            timeout, hold = None, None
            if isinstance(load, PoissonLoad | TraceLoad):
                timeout, hold = load.client_timeout, model.hold
            if model.variants:
                pools = {label: ServingPool(engine, model.window_s, timeout, hold)
                         for label, (engine, _) in model.variants.items()}  # fmt: skip
                units = {label: worth for label, (_, worth) in model.variants.items()}
                self.serving[name] = MixedPool(pools, units, workload.seed)
            else:
                self.serving[name] = ServingPool(model.profile, model.window_s, timeout, hold)
            if isinstance(load, SessionsLoad):
                self._sources[name] = sessions_source(name, load, workload, model.profile)
            elif isinstance(load, PoissonLoad | TraceLoad):
                source: PoissonSource | TraceSource
                if isinstance(load, PoissonLoad):
                    source = PoissonSource(name, load, workload, model.profile)
                else:
                    source = TraceSource(name, load, workload, model.profile)
                if warmup_s > 0:
                    opening = opening_drawn(name, load, workload, model.profile, warmup_s)
                    self._sources[name] = OpeningTraffic(opening, source)
                else:
                    self._sources[name] = source

    # ---- driven by the controller (or a baseline) -------------------------------------------------------
    def open_report(self, now: float = 0.0) -> None:
        """The report starts here: what was recorded before (a warm-up) is dropped, and requests sent before
        ``now`` are not judged when their first token comes (they were the warm-up's)."""
        for name in self.models:
            self.meters[name] = TierMeter(peak_ready=len(self._members[name][0]))
        for pool in self.serving.values():
            pool.record = PoolRecord(since=now)
        for batch in self.batch.values():
            batch.record = BatchRecord()  # no batch traffic before the start: nothing of it is lost
        self._slo_cursor.clear()

    def set_instances(self, tier: str, ready: Iterable[str], draining: Iterable[str] = (), now: float = 0.0) -> None:
        """The tier's ready (routable) and draining instances from now on. An instance that was ready and is
        in neither set was lost without notice: its work is retried elsewhere (counted as an interruption)."""
        ready_set, drain_set = set(ready), set(draining)
        before_ready, _ = self._members[tier]
        lost = before_ready - ready_set - drain_set
        self.meters[tier].interruptions += len(lost)
        self._members[tier] = (ready_set, drain_set)
        pool = self.serving.get(tier) or self.batch[tier]
        pool.set_instances(ready_set, drain_set, now)

    def place(self, tier: str, iid: str, gpu: str, gpu_count: int) -> None:
        """The hardware an instance of a tier with variants runs on (others: nothing to know)."""
        pool = self.serving.get(tier)
        if isinstance(pool, MixedPool):
            pool.place(iid, hardware_label(gpu, gpu_count))

    def interrupt(self, tier: str, ids: Iterable[str], now: float) -> int:
        """Instances lost without notice (spot preemption). Returns how many requests/tasks were retried."""
        gone = set(ids)
        ready_set, drain_set = self._members[tier]
        self.meters[tier].interruptions += len(gone & (ready_set | drain_set))
        self._members[tier] = (ready_set - gone, drain_set - gone)
        pool = self.serving.get(tier) or self.batch[tier]
        return pool.interrupt(sorted(gone), now)  # sorted: the retry order must not follow string hashing

    def bill(self, tier: str, t0: float, t1: float, instances: int) -> None:
        """Instances billed over [t0, t1) (provisioning included), as the cloud counts them."""
        meter = self.meters[tier]
        meter.billed_reported = True
        meter.billed_seconds += instances * (t1 - t0)
        meter.billed_timeline.append((t1, instances))

    def advance(self, t0: float, t1: float) -> None:
        for name in self.models:
            ready_set, drain_set = self._members[name]
            meter = self.meters[name]
            meter.serving_seconds += (len(ready_set) + len(drain_set)) * (t1 - t0)
            meter.peak_ready = max(meter.peak_ready, len(ready_set))
            if name in self.serving:
                self.serving[name].advance(t0, t1, self._sources.get(name))  # type: ignore[arg-type]
            elif t1 <= 0:  # a steady start's warm-up: a batch queue opens empty (workloads/opening.py)
                self.batch[name].advance(t0, t1, np.empty(0), np.empty(0))
            else:
                self.batch[name].advance(t0, t1, *self._tasks[name].tasks(max(t0, 0.0), t1))

    def signals(self, tier: str) -> Signals:
        pool = self.serving.get(tier) or self.batch[tier]
        return pool.signals()

    def work_on(self, tier: str, iid: str) -> int:
        """Requests (serving) or tasks (batch) still running on one instance: what a graceful drain waits for."""
        if tier in self.serving:
            return self.serving[tier].in_flight_by_instance().get(iid, 0)
        return self.batch[tier].running_on(iid)

    def slo_so_far(self, tier: str) -> tuple[int, int]:
        """(met, judged) so far: requests with a first token (tasks started), and how many of them within the
        target. What still waits is not judged yet, so the misses are a lower bound of the run's."""
        load = self.models[tier].load
        seen, met, judged = self._slo_cursor.get(tier, (0, 0, 0))
        if isinstance(load, BatchLoad):
            waits = self.batch[tier].record.waits
            values, seen_now = np.asarray(waits[seen:], dtype=np.float64), len(waits)
            target = load.wait_target
        else:
            chunks = self.serving[tier].record.ttft
            values = np.concatenate(chunks[seen:]) if chunks[seen:] else np.empty(0)
            seen_now, target = len(chunks), load.ttft_target
        met, judged = met + int((values <= target).sum()), judged + int(values.size)
        self._slo_cursor[tier] = (seen_now, met, judged)
        return met, judged

    def instance_seconds(self, tier: str) -> float:
        meter = self.meters[tier]
        return meter.billed_seconds if meter.billed_reported else meter.serving_seconds
