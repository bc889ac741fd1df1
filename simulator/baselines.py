"""What the same workload costs without our controller, on the same fleet model.

* static: the peak need, provisioned all day (what teams do when they fear cold starts);
* reactive: KEDA/HPA semantics — every 30 s, desired = ceil(metric / target per instance); scale up at once,
  scale down only to the highest desired of the last 300 s (stabilisation window); new instances take the
  same provisioning delay as ours;
* oracle: a lower bound on cost — at every moment the fewest instances that hold the TTFT target for the load
  of that moment, with no provisioning delay and perfect packing (batch: task-seconds / concurrency).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from policies.types import Signals
from simulator.capacity import Capacity, capacity_for
from simulator.fleet import Fleet, TierModel
from simulator.report import BaselineOutcome, outcomes
from simulator.workloads.shapes import evaluate
from simulator.workloads.sources import BatchTasks, PoissonSource, TraceSource
from simulator.workloads.spec import BatchLoad, PoissonLoad, SessionsLoad, TraceLoad, Workload

DEFAULT_PROVISIONING_DELAY_S = 180.0
NEED_STEP_S = 60.0  # the oracle re-decides every minute


@dataclass(frozen=True, slots=True)
class BaselineSettings:
    provisioning_delay_s: float = DEFAULT_PROVISIONING_DELAY_S
    poll_s: float = 30.0  # KEDA pollingInterval
    stabilization_s: float = 300.0  # HPA scaleDown stabilizationWindowSeconds
    target_utilisation: float = 0.8  # HPA target: this share of an instance's concurrency at the SLO
    tick_s: float = 5.0
    max_instances: int = 1000


# ---- need over time (oracle and static) ------------------------------------------------------------------
def need_timeline(workload: Workload, model: TierModel) -> tuple[np.ndarray, np.ndarray]:
    """Minute grid and the fewest instances that hold the SLO for the load of each minute."""
    grid = np.arange(0.0, workload.duration, NEED_STEP_S)
    load = model.load
    if isinstance(load, BatchLoad):
        t, run = BatchTasks(model.name, load, workload).all_tasks(workload.duration)
        # Tasks running at each minute if every task started the moment it was queued.
        starts = np.searchsorted(t, grid + NEED_STEP_S)
        ends = np.searchsorted(np.sort(t + run), grid)
        return grid, np.ceil((starts - ends) / load.concurrency)
    assert model.profile is not None
    cap = capacity_for(model.profile, load, workload)
    if cap.per_instance <= 0:
        raise ValueError(f"tier {model.name!r}: one instance cannot meet the TTFT target even at the lightest load")
    if isinstance(load, SessionsLoad):
        active = np.rint(load.sessions * evaluate(load.shape, grid, workload.start_epoch))
        return grid, np.ceil(active / cap.per_instance)
    source: PoissonSource | TraceSource
    source = TraceSource(model.name, load, workload, model.profile) if isinstance(load, TraceLoad) else (
        PoissonSource(model.name, load, workload, model.profile))  # fmt: skip
    assert isinstance(load, PoissonLoad | TraceLoad)
    times = source.arrivals(0.0, workload.duration).col(0)
    per_minute = np.bincount(np.floor(times / NEED_STEP_S).astype(np.int64), minlength=grid.shape[0])[: grid.shape[0]]
    return grid, np.ceil(per_minute / NEED_STEP_S / cap.per_instance)


def oracle(workload: Workload, model: TierModel) -> BaselineOutcome:
    if isinstance(model.load, BatchLoad):
        _, run = BatchTasks(model.name, model.load, workload).all_tasks(workload.duration)
        hours = float(run.sum()) / model.load.concurrency / 3600.0
    else:
        _, need = need_timeline(workload, model)
        hours = float(need.sum()) * NEED_STEP_S / 3600.0
    return BaselineOutcome("oracle", hours * model.price_per_hour, hours * model.gpu_count, None)


def static_count(workload: Workload, model: TierModel) -> int:
    _, need = need_timeline(workload, model)
    return max(1, int(need.max()) if need.shape[0] else 1)


# ---- running a baseline through the fleet model ----------------------------------------------------------
Decide = Callable[[str, float, Signals, int], int]


def run_counts(
    workload: Workload,
    models: Mapping[str, TierModel],
    decide: Decide,
    settings: BaselineSettings,
    *,
    poll_s: float,
    initial: Mapping[str, int],
    delay_s: float,
) -> Fleet:
    """Drive the fleet with ``decide(tier, now, signals, current) -> desired`` every ``poll_s``."""
    fleet = Fleet(workload, models)
    ready: dict[str, list[str]] = {}
    pending: dict[str, deque[tuple[float, str]]] = {name: deque() for name in models}
    counter = 0
    for name in models:
        ready[name] = [f"{name}-{i}" for i in range(initial.get(name, 0))]
        counter += len(ready[name])
        fleet.set_instances(name, ready[name], (), 0.0)
    t, tick, next_poll = 0.0, settings.tick_s, 0.0
    while t < workload.duration - 1e-9:
        t1 = min(t + tick, workload.duration)
        poll = t >= next_poll - 1e-9
        if poll:
            next_poll += poll_s
        for name in models:
            draining: list[str] = []
            queue = pending[name]
            if poll:
                current = len(ready[name]) + len(queue)
                desired = max(0, min(settings.max_instances, decide(name, t, fleet.signals(name), current)))
                while current < desired:
                    counter += 1
                    queue.append((t + delay_s, f"{name}-{counter}"))
                    current += 1
                while current > desired and queue:
                    queue.pop()  # cancel what is still provisioning first
                    current -= 1
                while current > desired and ready[name]:
                    draining.append(ready[name].pop())
                    current -= 1
            while queue and queue[0][0] <= t + 1e-9:
                ready[name].append(queue.popleft()[1])
            fleet.set_instances(name, ready[name], draining, t)
            fleet.bill(name, t, t1, len(ready[name]) + len(queue) + len(draining))
        fleet.advance(t, t1)
        t = t1
    return fleet


def run_static(workload: Workload, models: Mapping[str, TierModel], settings: BaselineSettings) -> Fleet:
    counts = {name: static_count(workload, m) for name, m in models.items()}
    return run_counts(
        workload, models, lambda name, _t, _s, _c: counts[name], settings,
        poll_s=workload.duration, initial=counts, delay_s=0.0,
    )  # fmt: skip


class Reactive:
    """HPA/KEDA: desired = ceil(metric / target per instance), 300 s scale-down stabilisation window."""

    def __init__(self, workload: Workload, models: Mapping[str, TierModel], settings: BaselineSettings) -> None:
        self.settings = settings
        self.targets: dict[str, float] = {}
        self.floors: dict[str, int] = {}
        for name, model in models.items():
            if isinstance(model.load, BatchLoad):
                self.targets[name] = float(model.load.concurrency)  # KEDA listLength: tasks per instance
                self.floors[name] = 0
            else:
                assert model.profile is not None
                cap: Capacity = capacity_for(model.profile, model.load, workload)
                self.targets[name] = max(1.0, settings.target_utilisation * cap.concurrency)
                self.floors[name] = 1
        self._history: dict[str, deque[tuple[float, int]]] = {name: deque() for name in models}

    def __call__(self, tier: str, now: float, signals: Signals, current: int) -> int:
        if signals.queue_depth is not None:
            metric: float | None = signals.queue_depth + (signals.in_flight or 0.0)
        elif signals.requests_running is not None:
            metric = signals.requests_running + (signals.requests_waiting or 0.0)
        else:
            metric = None
        if metric is None:  # no reading (no instance up): hold, but never below the floor
            raw = max(current, self.floors[tier])
        else:
            raw = max(self.floors[tier], math.ceil(metric / self.targets[tier]))
        history = self._history[tier]
        history.append((now, raw))
        while history and history[0][0] < now - self.settings.stabilization_s:
            history.popleft()
        stabilised = max(r for _, r in history)
        return raw if raw >= current else min(current, stabilised)


def run_reactive(workload: Workload, models: Mapping[str, TierModel], settings: BaselineSettings) -> Fleet:
    decide = Reactive(workload, models, settings)
    return run_counts(
        workload, models, decide, settings, poll_s=settings.poll_s, initial=decide.floors,
        delay_s=settings.provisioning_delay_s,
    )  # fmt: skip


def run_baselines(
    workload: Workload, models: Mapping[str, TierModel], settings: BaselineSettings | None = None
) -> dict[str, dict[str, BaselineOutcome]]:
    """Static, reactive and oracle outcomes per tier."""
    cfg = settings or BaselineSettings()
    result: dict[str, dict[str, BaselineOutcome]] = {name: {} for name in models}
    for label, runner in (("static", run_static), ("reactive", run_reactive)):
        fleet = runner(workload, models, cfg)
        for name, out in outcomes(fleet, workload.duration).items():
            result[name][label] = BaselineOutcome(label, out.cost, out.gpu_hours, out.slo_attainment)
    for name, model in models.items():
        result[name]["oracle"] = oracle(workload, model)
    return result
